// The quick tier's run of crash.ts: every behaviour it checks, across 2 crashes (crash.long.test.ts: 20).
import { killUnderWriteLoad } from './crash.js';

killUnderWriteLoad(2);
