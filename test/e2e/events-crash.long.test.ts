// The long tier's run of events-crash.ts (npm run test:long): 20 crashes on each engine.
import { killWithReceivers } from './events-crash.js';

killWithReceivers(20);
