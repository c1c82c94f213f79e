/**
 * queenctl's version. Kept equal to the versions in package.json and
 * packages/queenctl/package.json by a unit test (test/unit/cli-commands.test.ts),
 * so the installed bin and the repository never disagree.
 */
export const QUEENCTL_VERSION = '0.1.0';
