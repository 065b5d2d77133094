// The quick tier's run of crash-gardens.ts: every behaviour it checks, across 2 crashes (crash-gardens.long.test.ts: 8).
import { killWhileSharing } from './crash-gardens.js';

killWhileSharing(2);
