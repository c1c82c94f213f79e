import { access, readFile } from 'node:fs/promises';
import test from 'ava';
import { parse as parseYaml } from 'yaml';

/**
 * docker-compose.yml cannot be started here (no Docker engine); this checks
 * what can be checked without one: the services the README promises, the
 * pinned versions matching the local scripts, every mounted file existing,
 * the service getting only variables src/config.ts reads, and the same
 * hardening as the Helm chart.
 */

const ROOT = new URL('../../../', import.meta.url);
const read = (p: string) => readFile(new URL(p, ROOT), 'utf8');

interface Service {
  image?: string;
  build?: string;
  environment?: Record<string, string | number>;
  volumes?: string[];
  ports?: string[];
  user?: string;
  read_only?: boolean;
  tmpfs?: string[];
  cap_drop?: string[];
}
interface Compose {
  services: Record<string, Service>;
}

const compose = async (): Promise<Compose> => parseYaml(await read('docker-compose.yml'));

test('the stack: PostgreSQL 15, Kafka (KRaft, the local scripts’ version), Jaeger v2 with UI, Prometheus, Grafana, the service', async (t) => {
  const { services } = await compose();
  t.deepEqual(Object.keys(services).sort(), ['grafana', 'jaeger', 'kafka', 'postgres', 'prometheus', 'queen-ingress']);
  t.regex(services.postgres!.image!, /^postgres:15\.\d+/);
  const localKafka = /<kafka\.version>([^<]+)</.exec(await read('deploy/local/kafka/pom.xml'))![1];
  t.is(services.kafka!.image, `apache/kafka:${localKafka}`);
  const kenv = services.kafka!.environment!;
  t.is(kenv.KAFKA_PROCESS_ROLES, 'broker,controller');
  t.false(Object.keys(kenv).some((k) => k.includes('ZOOKEEPER')));
  t.regex(String(kenv.CLUSTER_ID), /^[A-Za-z0-9_-]{22}$/, 'a KRaft cluster id is 16 bytes, base64url');
  t.regex(services.jaeger!.image!, /^jaegertracing\/jaeger:2\.\d+\.\d+$/);
  t.true(services.jaeger!.ports!.some((p) => p.endsWith(':16686')));
  t.is(services['queen-ingress']!.build, '.');
});

test('every file or folder mounted from the repository exists', async (t) => {
  const { services } = await compose();
  const mounts = Object.values(services)
    .flatMap((s) => s.volumes ?? [])
    .filter((v) => v.startsWith('./'));
  t.true(mounts.length >= 5);
  for (const m of mounts) await t.notThrowsAsync(access(new URL(m.split(':')[0]!, ROOT)), m);
});

test('the service gets only variables src/config.ts reads, and runs like the chart runs it', async (t) => {
  const { services } = await compose();
  const svc = services['queen-ingress']!;
  const config = await read('src/config.ts');
  for (const name of Object.keys(svc.environment!)) t.true(config.includes(name), `${name} is not read by src/config.ts`);
  const values = parseYaml(await read('deploy/helm/queen-ingress/values.yaml')) as {
    podSecurityContext: { runAsUser: number; runAsGroup: number };
  };
  t.is(svc.user, `${values.podSecurityContext.runAsUser}:${values.podSecurityContext.runAsGroup}`);
  t.true(svc.read_only);
  t.deepEqual(svc.tmpfs, ['/tmp']);
  t.deepEqual(svc.cap_drop, ['ALL']);
});

test('Prometheus scrapes the service and loads the chart’s alert rules; Grafana provisions Prometheus and the dashboards folder', async (t) => {
  const { services } = await compose();
  const prom = parseYaml(await read('deploy/compose/prometheus.yml')) as {
    rule_files: string[];
    scrape_configs: { static_configs: { targets: string[] }[] }[];
  };
  t.deepEqual(prom.scrape_configs[0]!.static_configs[0]!.targets, ['queen-ingress:6632']);
  const ruleMount = services.prometheus!.volumes!.find((v) => v.includes(':/etc/prometheus/alerts.yml'));
  t.is(ruleMount, './deploy/helm/queen-ingress/files/alerts.yml:/etc/prometheus/alerts.yml:ro');
  t.deepEqual(prom.rule_files, ['/etc/prometheus/alerts.yml']);
  const ds = parseYaml(await read('deploy/compose/grafana/provisioning.yml')) as { datasources: { url: string }[] };
  t.is(ds.datasources[0]!.url, 'http://prometheus:9090');
  const dash = parseYaml(await read('deploy/compose/grafana/dashboards.yml')) as { providers: { options: { path: string } }[] };
  t.true(services.grafana!.volumes!.includes(`./observability:${dash.providers[0]!.options.path}:ro`));
});
