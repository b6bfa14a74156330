// One process's start as far as the signing secret goes: prints the secret loadConfig settles on
// for DATA_DIR. It reads at START_AT (ms since the epoch), so that processes started one after
// another read at once; with NO_HARD_LINKS set, link() fails as on a file system without them.
import fs from 'node:fs';
import { loadConfig } from '../../src/config.js';

if (process.env.NO_HARD_LINKS) {
  fs.linkSync = () => {
    throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
  };
}
await new Promise((resolve) => setTimeout(resolve, Number(process.env.START_AT) - Date.now()));
console.log(loadConfig({ ATRIUM_DATA_DIR: process.env.DATA_DIR }).signingSecret);
