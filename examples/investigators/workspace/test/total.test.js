import { test } from 'node:test';
import assert from 'node:assert/strict';
import { orderTotal } from '../src/total.js';

const order = [{ price: 2.5, qty: 2 }, { price: 5, qty: 1 }];

test('an order without a discount costs the sum of its lines', () => {
  assert.equal(orderTotal(order), 10);
});

test('a 10% discount takes a tenth off', () => {
  assert.equal(orderTotal(order, 10), 9);
});
