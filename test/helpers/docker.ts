import http from 'node:http';

/**
 * Does a Docker engine answer here? The one question behind the test
 * dependencies switch (test/helpers/testDeps.ts): with an engine, `make test`
 * may run PostgreSQL and Kafka through testcontainers; without one (CI, and
 * this project's development machines) it uses the local scripts.
 *
 * "Answers" means the engine's own health endpoint (GET /_ping -> 200 "OK")
 * responds within the timeout; a docker CLI on the PATH or a stale socket file
 * does not count.
 */
export type DockerEngine = { available: true; endpoint: string } | { available: false; reason: string };

export async function detectDockerEngine(env: Record<string, string | undefined>, timeoutMs = 2_000): Promise<DockerEngine> {
  const host = env.DOCKER_HOST?.trim() || 'unix:///var/run/docker.sock';
  let target: http.RequestOptions;
  if (host.startsWith('unix://')) target = { socketPath: host.slice('unix://'.length) };
  else if (host.startsWith('tcp://')) {
    const u = new URL(`http://${host.slice('tcp://'.length)}`);
    target = { host: u.hostname, port: Number(u.port || 2375) };
  } else return { available: false, reason: `DOCKER_HOST=${host} is neither unix:// nor tcp://` };

  return new Promise((resolve) => {
    const req = http.get({ ...target, path: '/_ping', timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () =>
        resolve(
          res.statusCode === 200 && body.trim() === 'OK'
            ? { available: true, endpoint: host }
            : { available: false, reason: `${host}/_ping answered ${res.statusCode} ${JSON.stringify(body.slice(0, 80))}` },
        ),
      );
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ available: false, reason: `${host}: ${err.code ?? err.message}` }));
  });
}

export type DepsMode = 'docker' | 'local';

/**
 * The switch: QUEEN_TEST_DEPS=local|docker forces a mode; otherwise docker
 * when an engine answers, else local. Returns the mode and why, for the log.
 */
export async function chooseDeps(env: Record<string, string | undefined>): Promise<{ mode: DepsMode; why: string }> {
  const forced = env.QUEEN_TEST_DEPS?.trim();
  if (forced === 'local') return { mode: 'local', why: 'QUEEN_TEST_DEPS=local' };
  const engine = await detectDockerEngine(env);
  if (forced === 'docker') {
    if (!engine.available) throw new Error(`QUEEN_TEST_DEPS=docker, but no Docker engine answers (${engine.reason})`);
    return { mode: 'docker', why: 'QUEEN_TEST_DEPS=docker' };
  }
  if (forced) throw new Error(`QUEEN_TEST_DEPS must be "local" or "docker", got "${forced}"`);
  return engine.available
    ? { mode: 'docker', why: `a Docker engine answers at ${engine.endpoint}` }
    : { mode: 'local', why: `no Docker engine (${engine.reason})` };
}
