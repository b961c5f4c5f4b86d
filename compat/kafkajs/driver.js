#!/usr/bin/env node
// Raftwood's KafkaJS driver: one JSON command in, one JSON answer out.
//
//   node driver.js '{"op": "metadata", "bootstrap": "127.0.0.1:9092", "topics": ["t"]}'
//   node driver.js --serve      # one JSON command per stdin line, one answer per stdout line
//
// Answers are {"ok": true, "result": ...} or {"ok": false, "error": "...", "name": "..."}.
// Bytes (keys, values, header values) travel as base64 strings, null stays null; offsets
// and timestamps as numbers.  KafkaJS's own log goes to stderr (warnings and errors); the
// requests it sends (API name and version) are collected from its debug log and returned
// by {"op": "requests"}.  tests/integration/test_clients_kafkajs.py is the caller; see
// compat/README.md for what each op exercises.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')

// -- codecs: gzip is built in; snappy, lz4 and zstd are pure JS / wasm packages -----------
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
const lz4 = require('lz4js')
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  // Kafka's LZ4 (record batch v2) is the standard LZ4 frame format, which lz4js writes.
  async compress(encoder) {
    return Buffer.from(lz4.compress(encoder.buffer))
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer))
  },
})
const zstd = require('@bokuweb/zstd-wasm')
let zstdReady = null
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    await (zstdReady = zstdReady || zstd.init())
    return Buffer.from(zstd.compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    await (zstdReady = zstdReady || zstd.init())
    return Buffer.from(zstd.decompress(buffer))
  },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// -- logging: requests seen (from the debug log), warnings and errors to stderr -------------
const REQUEST_LINE = /^Request (\w+)\(key: (\d+), version: (\d+)\)/
const requestsSeen = new Map() // "Name vN" -> count
const logCreator = () => ({ label, log }) => {
  const match = REQUEST_LINE.exec(log.message || '')
  if (match) {
    const name = `${match[1]} v${match[3]}`
    requestsSeen.set(name, (requestsSeen.get(name) || 0) + 1)
    return
  }
  if (label === 'ERROR' || label === 'WARN') {
    const { message, timestamp, logger, ...extra } = log
    process.stderr.write(`kafkajs ${label} ${message} ${JSON.stringify(extra)}\n`)
  }
}

const b64 = buf => (buf == null ? null : Buffer.from(buf).toString('base64'))
const unb64 = text => (text == null ? null : Buffer.from(text, 'base64'))

// -- one Kafka instance per bootstrap, with a connected admin and a raw cluster ------------
const clients = new Map()

function client(bootstrap) {
  let entry = clients.get(bootstrap)
  if (!entry) {
    const kafka = new Kafka({
      clientId: 'raftwood-compat-kafkajs',
      brokers: [bootstrap],
      connectionTimeout: 5000,
      requestTimeout: 15000,
      retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
      logLevel: logLevel.DEBUG,
      logCreator,
    })
    entry = { kafka, admin: null, cluster: null, producers: new Map() }
    clients.set(bootstrap, entry)
  }
  return entry
}

async function admin(bootstrap) {
  const entry = client(bootstrap)
  if (!entry.admin) {
    const a = entry.kafka.admin()
    await a.connect()
    entry.admin = a
  }
  return entry.admin
}

// KafkaJS has no assign(): its only public consumer is a group member.  To read one
// partition from an offset the driver uses the cluster object the consumer itself runs on
// (KafkaJS's metadata, leader lookup, Fetch request and record batch decoder), created by
// the Kafka instance's private factory.
async function cluster(bootstrap) {
  const entry = client(bootstrap)
  if (!entry.cluster) {
    const { kafka } = entry
    const factory = Object.getOwnPropertySymbols(kafka)
      .find(symbol => symbol.description === 'private:Kafka:createCluster')
    if (!factory) throw new Error('this kafkajs version has no private:Kafka:createCluster')
    const c = kafka[factory]({ allowAutoTopicCreation: false, isolationLevel: 1 })
    await c.connect()
    entry.cluster = c
  }
  return entry.cluster
}

async function producer(bootstrap, idempotent) {
  const entry = client(bootstrap)
  const key = idempotent ? 'idempotent' : 'plain'
  if (!entry.producers.has(key)) {
    const p = entry.kafka.producer({
      allowAutoTopicCreation: false,
      idempotent,
      maxInFlightRequests: idempotent ? 1 : undefined,
      retry: idempotent ? undefined : { retries: 2 },
    })
    await p.connect()
    entry.producers.set(key, p)
  }
  return entry.producers.get(key)
}

// -- ops -------------------------------------------------------------------------------------
function toHeaders(pairs) {
  if (!pairs || pairs.length === 0) return undefined
  const headers = {}
  for (const [name, value] of pairs) {
    const bytes = unb64(value)
    if (name in headers) {
      headers[name] = [].concat(headers[name], bytes)
    } else {
      headers[name] = bytes
    }
  }
  return headers
}

function fromHeaders(headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const one of [].concat(value)) pairs.push([name, b64(one)])
  }
  return pairs
}

async function produce({ bootstrap, topic, records, acks, compression = 'none',
  idempotent = false, timeout = 10000 }) {
  if (!(compression in CODECS)) throw new Error(`unknown codec ${compression}`)
  const p = await producer(bootstrap, idempotent)
  const messages = records.map(r => ({
    partition: r.partition,
    key: unb64(r.key),
    value: unb64(r.value),
    timestamp: r.timestamp == null ? undefined : String(r.timestamp),
    headers: toHeaders(r.headers),
  }))
  const metadata = await p.send({
    topic,
    messages,
    acks: acks === 'all' ? -1 : Number(acks),
    compression: CODECS[compression],
    timeout,
  })
  // One send makes one batch per partition, in message order: record i of a partition is
  // at baseOffset + i.  acks=0 has no response, so no metadata and no offsets.
  const base = {}
  for (const m of metadata) {
    if (m.errorCode) throw new Error(`partition ${m.partition}: error code ${m.errorCode}`)
    base[m.partition] = m.baseOffset == null ? null : Number(m.baseOffset)
  }
  const seen = {}
  const offsets = records.map(r => {
    const index = seen[r.partition] || 0
    seen[r.partition] = index + 1
    const b = base[r.partition]
    return b == null || b < 0 ? null : b + index
  })
  return { offsets, metadata }
}

async function consume({ bootstrap, topic, partition, offset, count, waitMs = 15000,
  isolationLevel = 1 }) {
  const c = await cluster(bootstrap)
  await c.addTargetTopic(topic)
  const deadline = Date.now() + waitMs
  const got = []
  let next = Number(offset)
  let highWatermark = null
  while (got.length < count && Date.now() < deadline) {
    await c.refreshMetadataIfNecessary()
    const leaders = c.findLeaderForPartitions(topic, [partition])
    const [nodeId] = Object.keys(leaders)
    if (nodeId == null) throw new Error(`no leader for ${topic}-${partition}`)
    const broker = await c.findBroker({ nodeId })
    const answer = await broker.fetch({
      isolationLevel,
      maxWaitTime: 100,
      minBytes: 1,
      maxBytes: 10485760,
      topics: [{ topic, partitions: [{ partition, fetchOffset: String(next), maxBytes: 1048576 }] }],
    })
    const [data] = answer.responses[0].partitions
    highWatermark = Number(data.highWatermark)
    let advanced = false
    for (const m of data.messages) {
      const at = Number(m.offset)
      // A fetch answers whole batches: records before the fetch offset are dropped, as
      // KafkaJS's consumer does; control records are skipped.
      if (at < next) continue
      next = at + 1
      advanced = true
      if (m.isControlRecord) continue
      got.push({
        partition,
        offset: at,
        key: b64(m.key),
        value: b64(m.value),
        timestamp: Number(m.timestamp),
        headers: fromHeaders(m.headers),
      })
      if (got.length >= count) break
    }
    if (!advanced && next >= highWatermark) break // the end of the partition
  }
  return { records: got, highWatermark }
}

async function offsets({ bootstrap, topic, partition, which, timestamp }) {
  if (which === 'earliest' || which === 'latest') {
    // The public call: Admin.fetchTopicOffsets (ListOffsets -1 and -2).
    const a = await admin(bootstrap)
    const all = await a.fetchTopicOffsets(topic)
    const entry = all.find(o => o.partition === partition)
    if (!entry) throw new Error(`partition ${partition} not in ${JSON.stringify(all)}`)
    return { offset: Number(which === 'earliest' ? entry.low : entry.high), all }
  }
  if (which === 'timestamp') {
    // What consumer seeks by time use: the cluster's ListOffsets with a timestamp, answered
    // as the broker gave it (-1 when no record is that late).  Admin's
    // fetchTopicOffsetsByTimestamp replaces -1 by the high watermark.
    const c = await cluster(bootstrap)
    await c.addTargetTopic(topic)
    const [answer] = await c.fetchTopicsOffset([
      { topic, partitions: [{ partition }], fromTimestamp: Number(timestamp) },
    ])
    const entry = answer.partitions.find(o => o.partition === partition)
    return { offset: Number(entry.offset) }
  }
  throw new Error(`unknown offsets kind ${which}`)
}

async function metadata({ bootstrap, topics }) {
  const a = await admin(bootstrap)
  const cluster = await a.describeCluster()
  const result = { brokers: cluster.brokers, controller: cluster.controller, clusterId: cluster.clusterId }
  if (topics && topics.length) result.topics = (await a.fetchTopicMetadata({ topics })).topics
  return result
}

const ADMIN_METHODS = new Set([
  'createTopics', 'createPartitions', 'deleteTopicRecords', 'describeCluster', 'fetchTopicOffsets',
  'fetchTopicOffsetsByTimestamp', 'describeConfigs', 'deleteTopics', 'listTopics',
  'fetchTopicMetadata',
])

async function adminCall({ bootstrap, method, args = [] }) {
  if (!ADMIN_METHODS.has(method)) throw new Error(`admin method ${method} not offered`)
  const a = await admin(bootstrap)
  return await a[method](...args)
}

// The public group consumer (JoinGroup/SyncGroup/Heartbeat/OffsetCommit): subscribe from
// the beginning and read until `count` records or the deadline.
async function groupConsume({ bootstrap, topic, groupId, count, waitMs = 30000 }) {
  const { kafka } = client(bootstrap)
  const consumer = kafka.consumer({
    groupId, allowAutoTopicCreation: false, maxWaitTimeInMs: 100,
    sessionTimeout: 10000, heartbeatInterval: 1000, rebalanceTimeout: 10000,
  })
  const got = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let done
    const finished = new Promise(resolve => { done = resolve })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push({ partition, offset: Number(message.offset), key: b64(message.key),
          value: b64(message.value), timestamp: Number(message.timestamp),
          headers: fromHeaders(message.headers) })
        if (got.length >= count) done()
      },
    })
    const timer = setTimeout(done, waitMs)
    await finished
    clearTimeout(timer)
  } finally {
    await consumer.disconnect()
  }
  return { records: got }
}

const OPS = {
  produce,
  consume,
  offsets,
  metadata,
  admin: adminCall,
  groupConsume,
  requests: async () => Object.fromEntries([...requestsSeen.entries()].sort()),
  versions: async () => ({ node: process.version, kafkajs: require('kafkajs/package.json').version }),
}

async function run(command) {
  const op = OPS[command.op]
  if (!op) return { ok: false, error: `unknown op ${command.op}`, name: 'Error' }
  try {
    return { ok: true, result: await op(command) }
  } catch (error) {
    const answer = { ok: false, error: String(error && error.message), name: error && error.name,
      type: error && error.type, retriable: error && error.retriable }
    if (error && Array.isArray(error.partitions)) {
      answer.partitions = error.partitions.map(({ partition, offset, error: cause }) =>
        ({ partition, offset, error: String(cause && cause.message), type: cause && cause.type }))
    }
    return answer
  }
}

async function shutdown() {
  const closing = []
  for (const entry of clients.values()) {
    for (const p of entry.producers.values()) closing.push(p.disconnect())
    if (entry.admin) closing.push(entry.admin.disconnect())
    if (entry.cluster) closing.push(entry.cluster.disconnect())
  }
  await Promise.race([Promise.allSettled(closing), new Promise(r => setTimeout(r, 5000))])
}

const reply = answer => process.stdout.write(JSON.stringify(answer) + '\n')

async function main() {
  // A hard limit on the whole process, whatever the caller does.
  const maxSeconds = Number(process.env.RAFTWOOD_KAFKAJS_MAX_SECONDS || 900)
  setTimeout(() => { process.stderr.write('driver.js: time limit\n'); process.exit(3) },
    maxSeconds * 1000).unref()
  const args = process.argv.slice(2)
  if (args[0] === '--serve') {
    const lines = readline.createInterface({ input: process.stdin })
    for await (const line of lines) {
      if (!line.trim()) continue
      let command
      try {
        command = JSON.parse(line)
      } catch (error) {
        reply({ ok: false, error: `bad JSON: ${error.message}`, name: 'SyntaxError' })
        continue
      }
      reply(await run(command))
    }
  } else {
    const text = args.length ? args[0] : require('fs').readFileSync(0, 'utf8')
    reply(await run(JSON.parse(text)))
  }
  await shutdown()
  process.exit(0)
}

main().catch(error => {
  process.stderr.write(`driver.js: ${error && error.stack}\n`)
  process.exit(2)
})
