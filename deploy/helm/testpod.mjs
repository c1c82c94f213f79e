// Runs the rendered `helm test` pod's command on this machine against a
// local HTTP server standing in for the release's Service, so check.sh shows
// that the pod passes on a 200 from the readiness path and fails otherwise
// (not only that it renders). The script runs under this machine's node, not
// the image's; both are Node >= 20 (global fetch, AbortSignal.timeout).
//
//   node deploy/helm/testpod.mjs FILE STATUS   # the server answers STATUS
//   node deploy/helm/testpod.mjs FILE closed   # nothing listens
//
// Prints one JSON line: the command's exit code and the path it asked for.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseAllDocuments } from 'yaml';

const [file, answer] = process.argv.slice(2);
if (!file || !answer) {
  console.error('usage: testpod.mjs FILE STATUS|closed');
  process.exit(2);
}
const pod = parseAllDocuments(readFileSync(file, 'utf8'))
  .map((d) => d.toJS())
  .find((o) => o?.kind === 'Pod' && o.metadata?.annotations?.['helm.sh/hook'] === 'test');
if (!pod) {
  console.error(`${file}: no Pod with helm.sh/hook: test`);
  process.exit(1);
}
const [container] = pod.spec.containers;
const [bin, ...args] = container.command;
if (bin !== 'node') {
  console.error(`the test pod runs ${bin}, not node`);
  process.exit(1);
}
const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
const target = new URL(env.READY_URL);

let asked = null;
const server = createServer((req, res) => {
  asked = req.url;
  res.writeHead(Number(answer), { 'content-type': 'application/json' });
  res.end(JSON.stringify({ status: Number(answer) === 200 ? 'ready' : 'not ready' }));
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address();
if (answer === 'closed') {
  server.close();
  await once(server, 'close');
}
const child = spawn(process.execPath, args, {
  env: { ...process.env, ...env, READY_URL: `http://127.0.0.1:${port}${target.pathname}` },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const [code] = await once(child, 'exit');
if (answer !== 'closed') server.close();
console.log(JSON.stringify({ exit: code, path: asked }));
