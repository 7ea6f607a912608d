#!/usr/bin/env node
// bench_worker.mjs: the Node worker of `kiln compare`'s WebAssembly rows, one backend per process,
// serving the bench protocol of profiler/bench.h on stdin/stdout (JSON lines):
//
//   → {"op":"setup","backend":B,"inputs":[npy...],"output_dir":DIR,"threads":T, ...}
//   ← {"ok":true,"result":{"outputs":[npy...],"first_ms":T,"pid":P,...facts}}
//   | {"ok":false,"status":"unavailable"|"failed","error":"one line"}
//   → {"op":"run","warm":W,"number":N}   ← {"ok":true,"ms":total of the N calls}
//   → {"op":"exit"}
//
// Backends:
//   kiln-wasm        "compile_argv": the `kiln compile MODEL --target wasm32...` command, run here
//                    in the setup phase with `-o OUTPUT_DIR/kiln-wasm-module`; then
//                    web/kiln_runtime.mjs runs that module, on one thread (wasm kernels have no
//                    thread pool)
//   onnxruntime-web  npm onnxruntime-web's WASM execution provider ("ort_dir": the package) on the
//                    model's ONNX file: "onnx" when the model is one, else the export the Python
//                    worker makes for the onnxruntime row ("onnx_worker": {"argv", "setup"}: this
//                    worker asks it, reads the file's path from its result and lets it go), with
//                    "threads" wasm threads
// Every input and output travels as a .npy file.
import {spawn, spawnSync} from 'node:child_process';
import {mkdirSync, readFileSync, writeFileSync} from 'node:fs';
import path from 'node:path';
import {performance} from 'node:perf_hooks';
import {createInterface} from 'node:readline';
import {pathToFileURL} from 'node:url';

import {DTYPES, KilnError, loadModule} from './kiln_runtime.mjs';

class Unavailable extends Error {}

// ---- .npy ----------------------------------------------------------------------------------------

const NPY_DESCR = {'<f4': 'f32', '<f8': 'f64', '<i8': 'i64', '<i4': 'i32', '|b1': 'bool', '|i1': 'i8', '|u1': 'u8'};

/** {dtype, shape, data} of a little-endian, C-order .npy file (versions 1-3). */
function readNpy(file) {
  const bytes = readFileSync(file);
  if (bytes.length < 10 || bytes[0] !== 0x93 || bytes.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = bytes[6];
  const headerLen = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !(descr in NPY_DESCR) || shapeText === undefined || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: unsupported .npy header ${header.trim()}`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const dtype = NPY_DESCR[descr];
  const {array, bytes: size} = DTYPES[dtype];
  const n = shape.reduce((a, b) => a * b, 1);
  const body = bytes.subarray(start + headerLen, start + headerLen + n * size);
  const data = new array(n);
  new Uint8Array(data.buffer).set(body);
  return {dtype, shape, data};
}

function writeNpy(file, {dtype, shape, data}) {
  const descr = Object.keys(NPY_DESCR).find((k) => NPY_DESCR[k] === dtype);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // 64-byte aligned data
  const head = Buffer.alloc(10);
  head[0] = 0x93;
  head.write('NUMPY', 1, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
                                     Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function firstLine(text) {
  return String(text).trim().split('\n').find((l) => l.trim() !== '') ?? '';
}

// ---- backends ------------------------------------------------------------------------------------

/** kiln-wasm: compile, load, and a synchronous call. */
async function setupKilnWasm(q, inputs) {
  const dir = path.join(q.output_dir, 'kiln-wasm-module');
  const [cmd, ...args] = [...q.compile_argv, '-o', dir];
  const start = performance.now();
  const compiled = spawnSync(cmd, args, {encoding: 'utf8'});
  if (compiled.error) throw new Unavailable(`cannot run ${cmd}: ${compiled.error.message}`);
  if (compiled.status !== 0) {
    const line = firstLine(compiled.stderr).replace(/^error: /, '');
    // A missing wasm-ld or wasi-libc (exit 6 from `kiln compile`) means this machine cannot build it.
    if (compiled.status === 6 && /wasm-ld|wasi-libc/.test(line)) throw new Unavailable(line);
    throw new Error(`kiln compile for wasm32 failed: ${line}`);
  }
  const compileSeconds = (performance.now() - start) / 1000;
  const module = await loadModule((name) => new Uint8Array(readFileSync(path.join(dir, name))), dir);
  module.setInputs(inputs.map((t) => t.data));
  const call = () => module.execute();
  const facts = {target: module.info.target, compile_seconds: compileSeconds, intra_op_threads: 1,
                 node_version: process.versions.node, v8_version: process.versions.v8};
  return {call, outputs: () => module.readOutputs(), facts};
}

/** The ONNX file of the model: the model itself, or the Python worker's (cached) export. */
async function onnxFile(q) {
  if (q.onnx) return {file: q.onnx, facts: {onnx: q.onnx, onnx_source: 'the model file'}};
  const {argv, setup} = q.onnx_worker;
  const outDir = path.join(q.output_dir, 'onnx-export');
  mkdirSync(outDir, {recursive: true});
  const child = spawn(argv[0], argv.slice(1), {stdio: ['pipe', 'pipe', 'ignore']});
  const lines = createInterface({input: child.stdout});
  const reply = await new Promise((resolve, reject) => {
    child.on('error', (e) => reject(new Unavailable(`cannot start the Python worker for the ONNX export: ${e.message}`)));
    lines.on('line', (line) => {
      try {
        const obj = JSON.parse(line);
        if ('ok' in obj) resolve(obj);
      } catch {
        // not a protocol line
      }
    });
    lines.on('close', () => reject(new Error('the Python worker ended before exporting the ONNX file')));
    child.stdin.write(JSON.stringify({...setup, op: 'setup', output_dir: outDir}) + '\n');
  });
  child.stdin.end(JSON.stringify({op: 'exit'}) + '\n');
  if (!reply.ok) {
    if (reply.status === 'unavailable') throw new Unavailable(`no ONNX file: ${reply.error}`);
    throw new Error(`no ONNX file: ${reply.error}`);
  }
  const facts = {};
  for (const k of ['onnx', 'onnx_source', 'onnx_opset', 'onnx_exporter']) if (k in reply.result) facts[k] = reply.result[k];
  return {file: reply.result.onnx, facts};
}

const ORT_TYPES = {f32: 'float32', f64: 'float64', i64: 'int64', i32: 'int32', bool: 'bool', i8: 'int8', u8: 'uint8'};

/** onnxruntime-web: an InferenceSession on the WASM execution provider; the call awaits the run. */
async function setupOrtWeb(q, inputs) {
  let ort;
  const entry = path.join(q.ort_dir, 'dist', 'ort.node.min.mjs');
  try {
    ort = await import(pathToFileURL(entry).href);
  } catch (e) {
    throw new Unavailable(`npm onnxruntime-web is not installed at ${q.ort_dir} (scripts/install-deps.sh installs it): ${firstLine(e.message)}`);
  }
  const {file, facts} = await onnxFile(q);
  const threads = Math.max(1, q.threads | 0);
  ort.env.wasm.numThreads = threads;
  const session = await ort.InferenceSession.create(file, {executionProviders: ['wasm'], graphOptimizationLevel: 'all'});
  if (session.inputNames.length !== inputs.length)
    throw new Error(`the ONNX model takes ${session.inputNames.length} input(s), the model ${inputs.length}`);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    feeds[name] = new ort.Tensor(ORT_TYPES[inputs[i].dtype], inputs[i].data, inputs[i].shape);
  });
  let last = null;
  const call = async () => {
    last = await session.run(feeds);
  };
  const outputs = () => session.outputNames.map((name) => {
    const t = last[name];
    const dtype = Object.keys(ORT_TYPES).find((k) => ORT_TYPES[k] === t.type);
    return {name, dtype, shape: [...t.dims], data: t.data};
  });
  const version = ort.env.versions?.web ?? ort.env.versions?.common ?? '';
  Object.assign(facts, {onnxruntime_web_version: version, execution_provider: 'wasm', intra_op_threads: threads,
                        node_version: process.versions.node, v8_version: process.versions.v8});
  return {call, outputs, facts};
}

// ---- the protocol --------------------------------------------------------------------------------

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function setup(q) {
  const inputs = q.inputs.map(readNpy);
  const backend = q.backend === 'kiln-wasm' ? await setupKilnWasm(q, inputs)
                : q.backend === 'onnxruntime-web' ? await setupOrtWeb(q, inputs)
                : null;
  if (!backend) throw new Error(`unknown backend '${q.backend}'`);
  reply({event: 'measuring'});
  const start = performance.now();
  await backend.call();
  const firstMs = performance.now() - start;
  mkdirSync(q.output_dir, {recursive: true});
  const outputs = backend.outputs().map((t, i) => {
    const file = path.join(q.output_dir, `out${i}.npy`);
    writeNpy(file, t);
    return file;
  });
  return {backend, result: {outputs, first_ms: firstMs, pid: process.pid, ...backend.facts}};
}

async function main() {
  const lines = createInterface({input: process.stdin});
  let backend = null;
  for await (const line of lines) {
    let q;
    try {
      q = JSON.parse(line);
    } catch {
      continue;
    }
    if (q.op === 'exit') break;
    if (q.op === 'setup') {
      try {
        const s = await setup(q);
        backend = s.backend;
        reply({ok: true, result: s.result});
      } catch (e) {
        const status = e instanceof Unavailable ? 'unavailable' : 'failed';
        reply({ok: false, status, error: firstLine(e instanceof KilnError || e instanceof Unavailable ? e.message : e.stack ?? e)});
      }
      continue;
    }
    if (q.op === 'run') {
      if (!backend) {
        reply({ok: false, status: 'failed', error: 'run before a successful setup'});
        continue;
      }
      try {
        for (let w = 0; w < (q.warm | 0); ++w) await backend.call();
        const number = Math.max(1, q.number | 0);
        const start = performance.now();
        for (let n = 0; n < number; ++n) await backend.call();
        reply({ok: true, ms: performance.now() - start});
      } catch (e) {
        reply({ok: false, status: 'failed', error: firstLine(e.message ?? e)});
      }
    }
  }
  process.exit(0);  // onnxruntime-web's wasm threads would keep the process alive
}

main();
