import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slugify } from '../src/slug.js';

test('slugify joins every word with a dash', () => {
  assert.equal(slugify('Hello Big World'), 'hello-big-world');
});

test('slugify collapses runs of spaces', () => {
  assert.equal(slugify('  Durable   Agents  '), 'durable-agents');
});
