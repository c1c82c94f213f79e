import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel, type KafkaConfig } from 'kafkajs';
import { waitFor } from './leaks.js';
import { kafkaClasspath } from './javaProducer.js';

const LOG4J = fileURLToPath(new URL('../../../deploy/local/kafka/log4j2.properties', import.meta.url));

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve) => {
          const s = createServer();
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/**
 * A throw-away single-node KRaft broker from the same jars as the default
 * test broker (which stays untouched), with two client listeners the way a
 * managed Kafka offers them:
 *   SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (users formatted into the metadata log)
 *   SSL             TLS with a self-signed certificate made here by the JDK's keytool
 * Credentials are random per run and live only in a temp dir that stop() deletes.
 */
export class SecureKafka {
  readonly user = 'queen';
  readonly password = randomBytes(12).toString('hex');
  saslBroker = '';
  sslBroker = '';
  /** PEM of the broker's self-signed certificate (the CA a client must trust). */
  caFile = '';
  private readonly dir = mkdtempSync(join(tmpdir(), 'queen-secure-kafka-'));
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;

  async start(): Promise<void> {
    const [sasl, ssl, internal, controller] = await freePorts(4);
    const storePass = randomBytes(8).toString('hex');
    const keystore = join(this.dir, 'broker.p12');
    execFileSync(
      'keytool',
      [
        '-genkeypair',
        '-keystore',
        keystore,
        '-storetype',
        'PKCS12',
        '-alias',
        'broker',
        '-keyalg',
        'RSA',
        '-keysize',
        '2048',
        '-dname',
        'CN=localhost',
        '-ext',
        'SAN=ip:127.0.0.1,dns:localhost',
        '-validity',
        '2',
        '-storepass',
        storePass,
        '-keypass',
        storePass,
      ],
      { stdio: 'ignore' },
    );
    this.caFile = join(this.dir, 'ca.pem');
    execFileSync(
      'keytool',
      ['-exportcert', '-rfc', '-alias', 'broker', '-keystore', keystore, '-storepass', storePass, '-file', this.caFile],
      { stdio: 'ignore' },
    );
    const jaasScram = 'org.apache.kafka.common.security.scram.ScramLoginModule required;';
    const props = [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controller}`,
      `listeners=SASL_PLAINTEXT://127.0.0.1:${sasl},SSL://127.0.0.1:${ssl},INTERNAL://127.0.0.1:${internal},CONTROLLER://127.0.0.1:${controller}`,
      `advertised.listeners=SASL_PLAINTEXT://127.0.0.1:${sasl},SSL://127.0.0.1:${ssl},INTERNAL://127.0.0.1:${internal}`,
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=INTERNAL',
      'listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL',
      `log.dirs=${join(this.dir, 'data')}`,
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${this.user}="${this.password}";`,
      `listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=${jaasScram}`,
      `listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=${jaasScram}`,
      `listener.name.ssl.ssl.keystore.location=${keystore}`,
      'listener.name.ssl.ssl.keystore.type=PKCS12',
      `listener.name.ssl.ssl.keystore.password=${storePass}`,
      `listener.name.ssl.ssl.key.password=${storePass}`,
      'offsets.topic.replication.factor=1',
      'offsets.topic.num.partitions=4',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'share.coordinator.state.topic.replication.factor=1',
      'share.coordinator.state.topic.min.isr=1',
      'group.initial.rebalance.delay.ms=0',
      'auto.create.topics.enable=true',
      'num.network.threads=1',
      'num.io.threads=2',
    ];
    const propsFile = join(this.dir, 'server.properties');
    writeFileSync(propsFile, props.join('\n') + '\n', { mode: 0o600 });
    const cp = kafkaClasspath();
    const jvm = ['-Djava.awt.headless=true', `-Dlog4j2.configurationFile=${LOG4J}`, '-Dqueen.kafka.loglevel=WARN', '-cp', cp];
    const clusterId = execFileSync('java', ['-Xmx128m', '-XX:TieredStopAtLevel=1', ...jvm, 'kafka.tools.StorageTool', 'random-uuid'], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .pop()!;
    execFileSync(
      'java',
      [
        '-Xmx256m',
        '-XX:TieredStopAtLevel=1',
        ...jvm,
        'kafka.tools.StorageTool',
        'format',
        '-t',
        clusterId,
        '-c',
        propsFile,
        '--add-scram',
        `SCRAM-SHA-256=[name=${this.user},password=${this.password}]`,
        '--add-scram',
        `SCRAM-SHA-512=[name=${this.user},password=${this.password}]`,
      ],
      { stdio: 'ignore' },
    );
    const log = join(this.dir, 'kafka.log');
    this.child = spawn(
      'bash',
      ['-c', 'exec "$@" >"$0" 2>&1', log, 'java', '-Xms128m', '-Xmx384m', '-XX:+UseSerialGC', ...jvm, 'kafka.Kafka', propsFile],
      { stdio: 'ignore' },
    );
    const child = this.child;
    this.exited = new Promise((resolve) => child.on('exit', () => resolve()));
    let dead = false;
    void this.exited.then(() => (dead = true));
    this.saslBroker = `127.0.0.1:${sasl}`;
    this.sslBroker = `127.0.0.1:${ssl}`;
    // Ready = an authenticated SCRAM client lists topics.
    await waitFor(
      'the SASL/TLS broker to answer',
      async () => {
        if (dead) throw new Error(`secure broker exited: ${readFileSync(log, 'utf8').slice(-3000)}`);
        const admin = this.client({ sasl: this.sasl('scram-sha-256') }).admin();
        try {
          await admin.connect();
          await admin.listTopics();
          return true;
        } catch {
          return false;
        } finally {
          await admin.disconnect().catch(() => undefined);
        }
      },
      180_000,
      500,
    );
  }

  sasl(mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'): KafkaConfig['sasl'] {
    return { mechanism, username: this.user, password: this.password } as KafkaConfig['sasl'];
  }

  /** A kafkajs client on the SASL listener (default) or the TLS one (when `ssl` is given). */
  client(opts: { sasl?: KafkaConfig['sasl']; ssl?: KafkaConfig['ssl'] }): Kafka {
    return new Kafka({
      clientId: 'queen-test',
      brokers: [opts.ssl ? this.sslBroker : this.saslBroker],
      ssl: opts.ssl,
      sasl: opts.sasl,
      logLevel: logLevel.NOTHING,
      retry: { retries: 2 },
    });
  }

  async stop(): Promise<void> {
    if (this.child?.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child?.kill('SIGKILL'), 20_000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
