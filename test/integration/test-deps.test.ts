import test from 'ava';
import { chooseDeps } from '../helpers/docker.js';

/**
 * This run's PostgreSQL and Kafka came from where the switch says they must
 * for this machine: scripts/with-deps.sh records the path it took in
 * QUEEN_TEST_DEPS_MODE ("local", "docker", or "external" when the user named
 * DATABASE_URL / KAFKA_BROKERS). Where no Docker engine answers (CI), that is
 * the local scripts.
 */
test('the dependencies of this run came from the path the switch chooses here', async (t) => {
  const taken = process.env.QUEEN_TEST_DEPS_MODE;
  t.true(taken === 'local' || taken === 'docker' || taken === 'external', `QUEEN_TEST_DEPS_MODE=${taken}: run through make test`);
  if (taken === 'external') return;
  const { mode, why } = await chooseDeps(process.env);
  t.log(`dependencies: ${taken} (${why})`);
  t.is(taken, mode);
});
