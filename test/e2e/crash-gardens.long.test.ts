// The long tier's run of crash-gardens.ts (npm run test:long): 8 crashes on each engine.
import { killWhileSharing } from './crash-gardens.js';

killWhileSharing(8);
