import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type InjectOptions, type LightMyRequestResponse } from 'fastify';
import type pg from 'pg';
import { ValidationError } from '../errors.js';
import { silentLogger, type Logger } from '../telemetry/logger.js';
import { messageVerdicts, type Counter, type Histogram, type MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { recording } from '../telemetry/tracing.js';
import { trace } from '@opentelemetry/api';
import { BearerAuth } from './auth.js';
import { clientErrorResponse, toHttpError } from './errorStatus.js';
import { registerOps, type FleetView, type IngressReadiness } from './routes/ops.js';
import { registerPush, type PushPath } from './routes/push.js';
import { registerQueues } from './routes/queues.js';
import { registerTimers } from './routes/timers.js';
import { registerConsume } from './routes/consume.js';
import { registerMessages } from './routes/messages.js';
import { registerVersion, type BuildInfo } from './routes/version.js';
import { buildInfo } from '../telemetry/buildInfo.js';
import type { ReadPath } from '../read/readPath.js';

export interface HttpApiOptions {
  /** The fusion layer (the same push path as Kafka ingress). */
  fusion: PushPath;
  /** For /configure, queue reads and the health check. */
  pool: pg.Pool;
  metrics: MetricsRegistry;
  /** The read side (pop, ack, transaction, lease); its routes exist only when given. */
  read?: ReadPath | undefined;
  /** When set, every /api route requires `Authorization: Bearer <token>`. */
  authToken?: string | undefined;
  /** Largest accepted request body; larger ones get 413. */
  maxBodyBytes: number;
  host: string;
  /** 0 picks a free port (tests); read `port` after start(). */
  port: number;
  logger?: Logger | undefined;
  /** Most items in one push request (400 above it). */
  maxItemsPerPush?: number | undefined;
  /** How long GET /health waits for PostgreSQL before answering 503. */
  healthTimeoutMs?: number | undefined;
  /** Retry-After sent with every 503. */
  retryAfterSeconds?: number | undefined;
  /** Longest time a client may take to send one whole request (slow uploads are cut off). */
  requestTimeoutMs?: number | undefined;
  /** The Kafka ingress's state for /health/ready (absent: no ingress). */
  ingressReadiness?: IngressReadiness | undefined;
  /** Set in a worker process (QUEEN_WORKERS > 1): /health/ready and /metrics answer for the whole pod. */
  fleet?: FleetView | undefined;
  /** What GET /api/v1/version reports (default: read from package.json and git, as queen_build_info). */
  build?: BuildInfo | undefined;
}

export const HTTP_DEFAULTS = { maxItemsPerPush: 10_000, healthTimeoutMs: 2_000, retryAfterSeconds: 1, requestTimeoutMs: 60_000 } as const;

/**
 * Longest path parameter the router hands to a route, in URL-encoded
 * characters. Fastify's default (100) is below the 128-character queue name
 * limit, and its 414 came out in fastify's shape; above every documented
 * limit, so a too-long name reaches the route and gets the route's own 400.
 */
const MAX_PARAM_LENGTH = 2048;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The broker's HTTP API (docs/http-api.md), a fastify server.
 *
 * States: the Component lifecycle (util/lifecycle.ts). start() builds the
 * routes and listens; `port` and `url` are valid while running. stop() stops
 * accepting connections, lets in-flight requests finish (new ones on open
 * keep-alive connections get 503) and closes idle connections, so it must be
 * stopped before the fusion layer it submits to.
 *
 * Errors: routes throw typed errors; the one error handler maps them
 * (errorStatus.ts) and is the one place a failure is logged.
 */
export class HttpApi extends Component {
  private app: FastifyInstance | undefined;
  private boundPort = 0;
  private readonly log: Logger;
  private readonly responses: Counter;
  private readonly durations: Histogram;

  constructor(private readonly opts: HttpApiOptions) {
    super('HttpApi');
    this.log = opts.logger ?? silentLogger;
    this.responses = opts.metrics.counter('queen_http_responses_total', 'HTTP responses by status code', 'status');
    this.durations = opts.metrics.histogram(
      'queen_http_request_duration_seconds',
      'HTTP request duration by method, route template and status code',
      { labelKeys: ['method', 'route', 'status_code'] },
    );
  }

  get port(): number {
    this.assertRunning();
    return this.boundPort;
  }

  get url(): string {
    const host = this.opts.host === '0.0.0.0' || this.opts.host === '::' ? '127.0.0.1' : this.opts.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  /**
   * Runs one request through the whole server (hooks, parser, routes, error
   * handler) without a socket: fastify's inject, for tests that send many
   * thousands of requests. Only while running.
   */
  inject(request: InjectOptions): Promise<LightMyRequestResponse> {
    this.assertRunning();
    return this.app!.inject(request);
  }

  protected async onStart(): Promise<void> {
    const app = this.build();
    this.app = app;
    await app.listen({ host: this.opts.host, port: this.opts.port });
    this.boundPort = (app.server.address() as AddressInfo).port;
    this.log.info({ host: this.opts.host, port: this.boundPort }, 'HTTP API listening');
  }

  protected async onStop(): Promise<void> {
    await this.app?.close();
    this.app = undefined;
  }

  private build(): FastifyInstance {
    const o = this.opts;
    const retryAfter = o.retryAfterSeconds ?? HTTP_DEFAULTS.retryAfterSeconds;
    const requestTimeout = o.requestTimeoutMs ?? HTTP_DEFAULTS.requestTimeoutMs;
    const app = Fastify({
      // Our error handler logs what deserves it; fastify's per-request logs would double that.
      logger: false,
      bodyLimit: o.maxBodyBytes,
      requestTimeout,
      // Node enforces requestTimeout only when it sweeps its connections,
      // every 30 s by default: a slow sender was cut after 60 to 90 s, not
      // the documented 60. Sweeping every tenth of the timeout (at most 1 s)
      // cuts it within 1 s of it; a sweep is a walk over open sockets. The
      // timeout is given to Node's server at creation too: only then does
      // its headersTimeout follow it (min(60 s, requestTimeout)); fastify
      // sets it afterwards, when the 60 s headers timeout is already fixed.
      http: { requestTimeout, connectionsCheckingInterval: checkingInterval(requestTimeout) },
      return503OnClosing: true,
      forceCloseConnections: 'idle',
      routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
      // Router errors (a bad percent-encoding, a path parameter over the
      // limit) and Node's parser errors answer in the one documented shape.
      frameworkErrors: (err, _req, reply) => {
        const a = toHttpError(err, retryAfter);
        void (reply as FastifyReply).code(a.status).headers(a.headers).send(a.body);
      },
      clientErrorHandler: (err, socket) => {
        if ((err as { code?: string }).code === 'ECONNRESET' || socket.destroyed) return;
        // As Node's own default handler: only when no response has started on
        // this socket. A request whose line was answered (a router error) and
        // whose body then fails to parse must not get a second response after
        // the first one's "Connection: close".
        const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
        if (socket.writable && !inFlight?.headersSent) socket.write(clientErrorResponse(err));
        socket.destroy(err);
      },
    });

    // JSON only: any other media type is 415. Our own parser, so a malformed
    // body is answered with the parser's reason and position.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => {
      // Strict UTF-8 (RFC 8259): a lenient decode would turn invalid bytes
      // into U+FFFD and so rewrite identities (queue, partition,
      // transactionId) the client never sent.
      let text: string;
      try {
        text = utf8.decode(body as Buffer);
      } catch {
        done(new ValidationError('the body is not valid UTF-8', 'body'), undefined);
        return;
      }
      if (text.trim() === '') {
        done(new ValidationError('the body is empty; send a JSON object', 'body'), undefined);
        return;
      }
      try {
        done(null, JSON.parse(text));
      } catch (err) {
        done(new ValidationError(`malformed JSON: ${(err as Error).message}`, 'body'), undefined);
      }
    });

    // The node:http instrumentation's server span knows no routes: name it `{method} {route}`.
    app.addHook('onRequest', async (req) => {
      const span = trace.getActiveSpan();
      const route = req.routeOptions.url;
      if (route && recording(span)) span.updateName(`${req.method} ${route}`).setAttribute('http.route', route);
    });
    app.addHook('onResponse', async (req, reply) => {
      this.responses.inc(1, String(reply.statusCode));
      // The route template, never the raw URL: label values stay bounded.
      this.durations.observe(reply.elapsedTime / 1000, {
        method: req.method,
        route: req.routeOptions.url ?? 'unmatched',
        status_code: reply.statusCode,
      });
    });

    app.setErrorHandler((err, req, reply) => {
      const a = toHttpError(err, retryAfter);
      if (a.status >= 500) {
        const level = a.status === 503 ? 'warn' : 'error';
        this.log[level]({ err, method: req.method, url: req.url, status: a.status }, 'request failed');
      }
      void reply.code(a.status).headers(a.headers).send(a.body);
    });
    app.setNotFoundHandler((req, reply) => {
      void reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]}`, retriable: false });
    });

    // The /api routes live in their own encapsulated scope so the token hook
    // applies to exactly these routes, however the request spelled the path.
    const auth = o.authToken ? new BearerAuth(o.authToken) : undefined;
    void app.register(async (api) => {
      if (auth) {
        api.addHook('onRequest', async (req) => {
          auth.check(req.headers.authorization);
        });
      }
      registerPush(api, o.fusion, o.maxItemsPerPush ?? HTTP_DEFAULTS.maxItemsPerPush, messageVerdicts(o.metrics));
      registerQueues(api, o.pool);
      registerTimers(api, o.pool);
      if (o.read) registerConsume(api, o.read, o.maxItemsPerPush ?? HTTP_DEFAULTS.maxItemsPerPush);
      if (o.read) registerMessages(api, o.pool, o.read);
      registerVersion(api, o.build ?? buildInfo(undefined));
    });
    registerOps(app, o.pool, o.metrics, o.healthTimeoutMs ?? HTTP_DEFAULTS.healthTimeoutMs, o.ingressReadiness, o.fleet);
    return app;
  }
}

/** How often Node sweeps for requests over requestTimeout: a tenth of it, 50 ms to 1 s. */
export function checkingInterval(requestTimeoutMs: number): number {
  return Math.min(1_000, Math.max(50, Math.floor(requestTimeoutMs / 10)));
}
