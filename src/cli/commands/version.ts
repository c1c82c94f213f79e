import type { Queen } from '../../client/index.js';
import { render, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';
import { QUEENCTL_VERSION } from '../version.js';

/**
 * `queenctl version [--client]`: queenctl's version and, unless --client, the
 * server's (GET /api/v1/version), as `kubectl version` shows both. When the
 * server cannot be asked, queenctl's own version is still printed, then the
 * error (exit 1), so "which queenctl is this" never needs a server:
 * `queenctl --version` and `version --client` do not contact one at all.
 */
export async function version(connect: () => Queen, io: CliIo, clientOnly: boolean, format: OutputFormat): Promise<void> {
  const own = `queenctl ${QUEENCTL_VERSION}\n`;
  if (clientOnly) {
    io.out(render({ value: { queenctl: QUEENCTL_VERSION }, names: [], text: own }, format));
    return;
  }
  let server;
  try {
    server = await connect().version();
  } catch (err) {
    io.out(render({ value: { queenctl: QUEENCTL_VERSION }, names: [], text: own }, format));
    throw err;
  }
  io.out(
    render(
      { value: { queenctl: QUEENCTL_VERSION, server }, names: [], text: `${own}server ${server.version} (commit ${server.commit})\n` },
      format,
    ),
  );
}
