// The quick tier's run of events-crash.ts: every behaviour it checks, across 2 crashes (events-crash.long.test.ts: 20).
import { killWithReceivers } from './events-crash.js';

killWithReceivers(2);
