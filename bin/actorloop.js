#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

const code = await main(process.argv.slice(2));
// Flush stdout before leaving: a piped NDJSON stream must not lose its last line.
process.stdout.write('', () => process.exit(code));
