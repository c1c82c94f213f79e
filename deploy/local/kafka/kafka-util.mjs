#!/usr/bin/env node
// Small helpers for kafka.sh. Deliberately dependency-free (only Node core
// modules) so they work in a fresh clone before `npm install` has run.
//
//   node kafka-util.mjs free-ports N        -> N free TCP ports on 127.0.0.1, one per line
//   node kafka-util.mjs cluster-id          -> a random KRaft cluster id (base64url of 16 bytes)
//   node kafka-util.mjs probe HOST:PORT [timeoutMs]
//        exit 0 when the broker answers ApiVersions AND a Metadata request
//        listing at least one (unfenced) broker; exit 1 otherwise.
//
// Doing the probe over the raw wire protocol instead of via the Kafka CLI saves
// a JVM start (2-4 s on a 2-core machine) per poll; instead of kafkajs, it
// avoids depending on node_modules.
import net from 'node:net';
import crypto from 'node:crypto';

const [cmd, ...args] = process.argv.slice(2);

async function freePorts(n) {
  // Keep all N sockets open until every port is known so we never get the
  // same port twice; the tiny race with other processes grabbing the port
  // before the broker binds it is handled by kafka.sh retrying the start.
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      await new Promise((res, rej) => {
        s.once('error', rej);
        s.listen({ host: '127.0.0.1', port: 0, exclusive: true }, res);
      });
      servers.push(s);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  }
}

function clusterId() {
  // Same shape as org.apache.kafka.common.Uuid#toString (and what
  // `StorageTool random-uuid` prints): URL-safe base64 without padding.
  // Kafka avoids ids starting with '-' because CLIs would read them as a flag.
  for (;;) {
    const id = crypto.randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

// ---- minimal Kafka wire protocol (non-flexible versions only) ----
const API_METADATA = 3;
const API_VERSIONS = 18;
const CLIENT_ID = 'queen-kafka-probe';

function request(apiKey, apiVersion, correlationId, body) {
  const cid = Buffer.from(CLIENT_ID);
  const header = Buffer.alloc(2 + 2 + 4 + 2);
  header.writeInt16BE(apiKey, 0);
  header.writeInt16BE(apiVersion, 2);
  header.writeInt32BE(correlationId, 4);
  header.writeInt16BE(cid.length, 8);
  const payload = Buffer.concat([header, cid, body]);
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length, 0);
  return Buffer.concat([size, payload]);
}

function roundTrip(host, port, reqs, timeoutMs) {
  // Sends the requests one after another on a single connection and resolves
  // with the response payloads (without the size prefix).
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host, port });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('timeout'));
    }, timeoutMs);
    let buf = Buffer.alloc(0);
    const out = [];
    let i = 0;
    const next = () => {
      if (i === reqs.length) {
        clearTimeout(timer);
        sock.end();
        resolve(out);
        return;
      }
      sock.write(reqs[i++]());
    };
    sock.on('connect', next);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) {
        const len = buf.readInt32BE(0);
        out.push(buf.subarray(4, 4 + len));
        buf = buf.subarray(4 + len);
        next();
      }
    });
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('close', () => {
      if (i < reqs.length || out.length < reqs.length) {
        clearTimeout(timer);
        reject(new Error('connection closed early'));
      }
    });
  });
}

async function probe(hostPort, timeoutMs) {
  const idx = hostPort.lastIndexOf(':');
  const host = hostPort.slice(0, idx);
  const port = Number(hostPort.slice(idx + 1));

  // 1) ApiVersions v0 (every broker answers v0) -> supported Metadata range.
  const [av] = await roundTrip(host, port, [() => request(API_VERSIONS, 0, 1, Buffer.alloc(0))], timeoutMs);
  let off = 4; // correlation id
  const err = av.readInt16BE(off);
  off += 2;
  if (err !== 0) throw new Error(`ApiVersions error ${err}`);
  const n = av.readInt32BE(off);
  off += 4;
  let mdMin = -1,
    mdMax = -1;
  for (let k = 0; k < n; k++) {
    const key = av.readInt16BE(off),
      min = av.readInt16BE(off + 2),
      max = av.readInt16BE(off + 4);
    off += 6;
    if (key === API_METADATA) {
      mdMin = min;
      mdMax = max;
    }
  }
  if (mdMax < 0) throw new Error('broker does not advertise Metadata');
  // We can encode v1..v8 (v9+ is a "flexible" version with a different encoding).
  const v = Math.min(mdMax, 8);
  if (v < Math.max(mdMin, 1)) {
    // A future broker that only speaks flexible Metadata: ApiVersions answering
    // is the best readiness signal we have without a real client.
    return { brokers: -1, metadataVersion: null };
  }

  // 2) Metadata with an empty topic list (v1+: "no topics", just brokers).
  const parts = [Buffer.from([0, 0, 0, 0])]; // topics: array of length 0
  if (v >= 4) parts.push(Buffer.from([0])); // allow_auto_topic_creation = false
  if (v >= 8) parts.push(Buffer.from([0, 0])); // include_*_authorized_operations = false
  const [md] = await roundTrip(host, port, [() => request(API_METADATA, v, 2, Buffer.concat(parts))], timeoutMs);
  off = 4; // correlation id
  if (v >= 3) off += 4; // throttle_time_ms
  const brokers = md.readInt32BE(off);
  return { brokers, metadataVersion: v };
}

try {
  switch (cmd) {
    case 'free-ports':
      console.log((await freePorts(Number(args[0] ?? 1))).join('\n'));
      break;
    case 'cluster-id':
      console.log(clusterId());
      break;
    case 'probe': {
      const r = await probe(args[0], Number(args[1] ?? 3000));
      if (r.brokers === 0) {
        // Listener is up but the broker is not registered/unfenced yet.
        console.error('probe: metadata lists no broker yet');
        process.exit(1);
      }
      console.error(`probe: ok (metadata v${r.metadataVersion}, brokers=${r.brokers})`);
      break;
    }
    default:
      console.error('usage: kafka-util.mjs free-ports N | cluster-id | probe HOST:PORT [timeoutMs]');
      process.exit(2);
  }
} catch (e) {
  console.error(`${cmd}: ${e.message}`);
  process.exit(1);
}
