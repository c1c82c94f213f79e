import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CliIo } from '../../src/cli/io.js';
import { run } from '../../src/cli/run.js';

/**
 * A stand-in for the broker's HTTP API in queenctl's unit tests: answers
 * each "METHOD /path" from a table (JSON bodies) and records every request,
 * so the CLI's requests and its rendering are checked without PostgreSQL.
 */
export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
  authorization: string | undefined;
}

export type FakeRoute = (req: FakeRequest) => { status?: number; body: unknown };

export interface FakeQueen {
  url: string;
  requests: FakeRequest[];
  close(): Promise<void>;
}

export async function fakeQueen(routes: Record<string, FakeRoute>): Promise<FakeQueen> {
  const requests: FakeRequest[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const raw = await text(req);
      const r: FakeRequest = {
        method: req.method ?? 'GET',
        path: url.pathname,
        query: url.searchParams,
        body: raw === '' ? undefined : (JSON.parse(raw) as unknown),
        authorization: req.headers.authorization,
      };
      requests.push(r);
      const route = routes[`${r.method} ${r.path}`];
      const answer = route ? route(r) : { status: 404, body: { error: 'not_found', message: `no route ${r.method} ${r.path}` } };
      res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function text(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Runs queenctl in-process with captured output; `stdin` feeds read('-') and lines('-'). */
export async function queenctlIn(
  args: string[],
  opts: { env?: Record<string, string>; stdin?: string | AsyncIterable<string> } = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const stdin = opts.stdin ?? '';
  const io: CliIo = {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
    env: opts.env ?? {},
    read: async () => (typeof stdin === 'string' ? stdin : ''),
    ...(typeof stdin === 'string' ? {} : { lines: async () => stdin }),
  };
  const code = await run(args, io);
  return { code, out, err };
}
