// `make test-jaeger` only: the Jaeger test needs a Jaeger binary, so `make test` (package.json's ava) leaves it out.
export default {
  files: ['dist/test/jaeger/**/*.test.js'],
  workerThreads: false,
  timeout: '5m',
  verbose: true,
};
