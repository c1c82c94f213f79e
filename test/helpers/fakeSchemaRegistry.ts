import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/**
 * NOT a Schema Registry: an in-process HTTP server answering the few calls of
 * Confluent's REST API that Confluent's JavaScript client makes for this
 * project's tests, for machines where no real registry can run (Confluent's
 * and Karapace's are not reachable from here; Apicurio's would need a Quarkus
 * build). It checks no compatibility, knows no contexts, and stores each
 * schema exactly as it was registered: a Protobuf schema registered by the
 * client's serializer is a base64 descriptor, which it returns for every
 * `format` (a real registry returns .proto text without `format=serialized`;
 * the service only reads `schemaType` from that answer).
 *
 *   POST /subjects/:subject/versions   register (or find) a schema -> {id}
 *   GET  /subjects/:subject/versions/latest   the subject's newest schema
 *   GET  /schemas/ids/:id              the schema -> {schema, schemaType}, or
 *                                      404 with error_code 40403
 *
 * Optional basic auth (401 otherwise), optional TLS (https with the given key and certificate); `down()` makes every call answer 503
 * as a registry behind a load balancer does while it is down; every request
 * is counted by path.
 */
export class FakeSchemaRegistry {
  private readonly server: Server;
  private readonly schemas = new Map<number, { schema: string; schemaType?: string; references?: unknown[] }>();
  private nextId = 1;
  /** Each subject's schema ids, oldest first. */
  private readonly subjects = new Map<string, number[]>();
  private unavailable = false;
  /** Requests by method and path without the query ("GET /schemas/ids/1"). */
  readonly requests = new Map<string, number>();
  /** Every Authorization header seen (tests check credentials arrived, never log them). */
  readonly authorizations: (string | undefined)[] = [];

  private constructor(
    private readonly auth: { user: string; password: string } | undefined,
    private readonly tls: { key: string; cert: string } | undefined,
  ) {
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.handle(req, res);
    this.server = tls ? createTlsServer(tls, handler) : createServer(handler);
  }

  static async start(
    opts: { auth?: { user: string; password: string }; tls?: { key: string; cert: string }; firstId?: number } = {},
  ): Promise<FakeSchemaRegistry> {
    const r = new FakeSchemaRegistry(opts.auth, opts.tls);
    if (opts.firstId) r.nextId = opts.firstId;
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    return r;
  }

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Answer 503 to everything (true) or serve again (false). */
  down(on: boolean): void {
    this.unavailable = on;
  }

  count(key: string): number {
    return this.requests.get(key) ?? 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://x');
    const key = `${req.method} ${url.pathname}`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    this.authorizations.push(req.headers.authorization);
    const reply = (status: number, body: unknown): undefined => {
      res.writeHead(status, { 'content-type': 'application/vnd.schemaregistry.v1+json' });
      res.end(JSON.stringify(body));
    };
    if (this.unavailable) {
      reply(503, { error_code: 50003, message: 'Service unavailable' });
      return;
    }
    if (this.auth) {
      const want = `Basic ${Buffer.from(`${this.auth.user}:${this.auth.password}`).toString('base64')}`;
      if (req.headers.authorization !== want) {
        reply(401, { error_code: 40101, message: 'Unauthorized' });
        return;
      }
    }
    const register = /^\/subjects\/([^/]+)\/versions$/.exec(url.pathname);
    if (req.method === 'POST' && register) {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { schema: string; schemaType?: string; references?: unknown[] };
      const type = body.schemaType ?? 'AVRO';
      let id = [...this.schemas].find(([, s]) => s.schema === body.schema && (s.schemaType ?? 'AVRO') === type)?.[0];
      if (id === undefined) {
        id = this.nextId++;
        this.schemas.set(id, { schema: body.schema, ...(type !== 'AVRO' ? { schemaType: type } : {}), references: body.references ?? [] });
      }
      const subject = decodeURIComponent(register[1]!);
      const ids = this.subjects.get(subject) ?? [];
      if (!ids.includes(id)) ids.push(id);
      this.subjects.set(subject, ids);
      reply(200, { id });
      return;
    }
    const latest = /^\/subjects\/([^/]+)\/versions\/latest$/.exec(url.pathname);
    if (req.method === 'GET' && latest) {
      const subject = decodeURIComponent(latest[1]!);
      const ids = this.subjects.get(subject);
      if (!ids?.length) {
        reply(404, { error_code: 40401, message: `Subject '${subject}' not found.` });
        return;
      }
      const id = ids[ids.length - 1]!;
      reply(200, { subject, id, version: ids.length, ...this.schemas.get(id)! });
      return;
    }
    const byId = /^\/schemas\/ids\/(\d+)$/.exec(url.pathname);
    if (req.method === 'GET' && byId) {
      const id = Number(byId[1]);
      const s = this.schemas.get(id);
      if (!s) {
        reply(404, { error_code: 40403, message: `Schema ${id} not found` });
        return;
      }
      reply(200, s);
      return;
    }
    reply(404, { error_code: 404, message: `not part of this stand-in: ${key}` });
  }
}
