import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const KAFKA_SH = fileURLToPath(new URL('../../../deploy/local/kafka/kafka.sh', import.meta.url));

/** The broker's jars (kafka.sh fetches them once); Kafka's own Java clients live there too. */
export function kafkaClasspath(): string {
  return execFileSync('bash', [KAFKA_SH, 'classpath'], { encoding: 'utf8' }).trim().split('\n').pop()!;
}

export interface JavaRecord {
  key: string;
  /** null: a tombstone. */
  value: string | null;
  /** A null value is Kafka's null header value. */
  headers?: Record<string, string | null>;
}

/** The console reader's null.marker: a key, value or header value equal to it is produced as null. */
const NULL_MARKER = '~null~';

/**
 * Produces records with Kafka's own Java producer (org.apache.kafka.tools.ConsoleProducer
 * from the broker's jars), e.g. with compression.type lz4, zstd or snappy, the way an
 * upstream Java service would. Records go in one process run, batched by the producer
 * (linger lets one batch hold many records). Keys, values and header values must not
 * contain tabs, commas, colons or newlines (the console reader's separators), and are
 * sent as their UTF-8 bytes (so a binary value must stay below 0x80, as a Confluent
 * frame with a small schema id does). A null value or header value is sent as
 * Kafka's null (the reader's null.marker).
 */
export async function javaProduce(
  brokers: string[],
  topic: string,
  records: JavaRecord[],
  opts: { compression: 'none' | 'gzip' | 'lz4' | 'zstd' | 'snappy'; extraProps?: Record<string, string> },
): Promise<void> {
  const props: Record<string, string> = {
    'linger.ms': '50',
    'batch.size': '262144',
    acks: 'all',
    'enable.idempotence': 'true',
    ...opts.extraProps,
  };
  const args = [
    '-Xmx128m',
    '-XX:TieredStopAtLevel=1',
    '-XX:+UseSerialGC',
    '-cp',
    kafkaClasspath(),
    'org.apache.kafka.tools.ConsoleProducer',
    '--bootstrap-server',
    brokers.join(','),
    '--topic',
    topic,
    '--compression-codec',
    opts.compression,
    '--reader-property',
    'parse.key=true',
    '--reader-property',
    'parse.headers=true',
    '--reader-property',
    `null.marker=${NULL_MARKER}`,
    ...Object.entries(props).flatMap(([k, v]) => ['--command-property', `${k}=${v}`]),
  ];
  const child = spawn('java', args, { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  for (const r of records) {
    const h = Object.entries(r.headers ?? {})
      .map(([k, v]) => `${k}:${v ?? NULL_MARKER}`)
      .join(',');
    // The reader splits any header field into pairs; a record without headers says so with the null marker.
    child.stdin.write(`${h || NULL_MARKER}\t${r.key}\t${r.value ?? NULL_MARKER}\n`);
  }
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`Java producer exited with ${code}: ${stderr.slice(-2000)}`);
}
