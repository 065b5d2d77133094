// The long tier's run of crash.ts (npm run test:long): 20 crashes on each engine.
import { killUnderWriteLoad } from './crash.js';

killUnderWriteLoad(20);
