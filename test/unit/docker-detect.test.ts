import http from 'node:http';
import net from 'node:net';
import test from 'ava';
import { chooseDeps, detectDockerEngine } from '../../test/helpers/docker.js';

/**
 * The testcontainers switch's detection, against real sockets: a missing
 * socket, a refused port and a silent listener are "no Docker"; only an
 * endpoint answering GET /_ping with 200 "OK" (what a Docker engine answers)
 * selects testcontainers.
 */

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as net.AddressInfo).port;
}

async function closedPort(): Promise<number> {
  const s = net.createServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

test('no socket file, a refused port, a silent listener and a non-ping answer are all "no Docker", with the reason', async (t) => {
  const missing = await detectDockerEngine({ DOCKER_HOST: 'unix:///nonexistent/docker.sock' });
  t.deepEqual(missing, { available: false, reason: 'unix:///nonexistent/docker.sock: ENOENT' });

  const port = await closedPort();
  t.deepEqual(await detectDockerEngine({ DOCKER_HOST: `tcp://127.0.0.1:${port}` }), {
    available: false,
    reason: `tcp://127.0.0.1:${port}: ECONNREFUSED`,
  });

  const silent = net.createServer(() => undefined);
  const silentPort = await listen(silent);
  const slow = await detectDockerEngine({ DOCKER_HOST: `tcp://127.0.0.1:${silentPort}` }, 200);
  silent.close();
  t.false(slow.available);
  t.regex((slow as { reason: string }).reason, /no answer within 200 ms/);

  const web = http.createServer((_req, res) => res.writeHead(404).end('not found'));
  const webPort = await listen(web);
  const notDocker = await detectDockerEngine({ DOCKER_HOST: `tcp://127.0.0.1:${webPort}` });
  web.close();
  t.deepEqual(notDocker, { available: false, reason: `tcp://127.0.0.1:${webPort}/_ping answered 404 "not found"` });

  t.false((await detectDockerEngine({ DOCKER_HOST: 'ssh://somewhere' })).available);
});

test('an endpoint that answers /_ping like an engine selects testcontainers; QUEEN_TEST_DEPS forces either way', async (t) => {
  const engine = http.createServer((req, res) => (req.url === '/_ping' ? res.writeHead(200).end('OK') : res.writeHead(404).end()));
  const port = await listen(engine);
  const env = { DOCKER_HOST: `tcp://127.0.0.1:${port}` };
  try {
    t.deepEqual(await detectDockerEngine(env), { available: true, endpoint: env.DOCKER_HOST });
    t.deepEqual(await chooseDeps(env), { mode: 'docker', why: `a Docker engine answers at ${env.DOCKER_HOST}` });
    t.deepEqual(await chooseDeps({ ...env, QUEEN_TEST_DEPS: 'local' }), { mode: 'local', why: 'QUEEN_TEST_DEPS=local' });
    await t.throwsAsync(chooseDeps({ ...env, QUEEN_TEST_DEPS: 'podman' }), { message: /must be "local" or "docker"/ });
  } finally {
    engine.close();
  }
  const none = { DOCKER_HOST: 'unix:///nonexistent/docker.sock' };
  t.deepEqual(await chooseDeps(none), { mode: 'local', why: 'no Docker engine (unix:///nonexistent/docker.sock: ENOENT)' });
  await t.throwsAsync(chooseDeps({ ...none, QUEEN_TEST_DEPS: 'docker' }), { message: /no Docker engine answers/ });
});
