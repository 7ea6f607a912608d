#!/usr/bin/env node
// run_model.mjs: runs a WebAssembly module exported by `kiln compile MODEL --target
// "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128" -o DIR` in Node, through web/kiln_runtime.mjs
// (the Node twin of examples/c_api/run_model.c).
//
//   node web/run_model.mjs DIR [--input IN.raw]... [--output OUT.raw]... [--warmup N] [--repeat N] [--json]
//
// Inputs come from raw files (the tensor's bytes, C order, little-endian) in forward-argument
// order; inputs without a file get the C example's pattern. Prints every input's and output's name,
// dtype and shape, then the first values, sum and argmax of each float output; --output writes
// outputs as raw bytes. --repeat N times N runs after --warmup runs (default 1) and prints the
// per-run milliseconds; --json prints one JSON object instead of text. Errors are one line
// `error: ...` on stderr with runtime/error.h's exit code.
import {readFile, writeFile} from 'node:fs/promises';
import path from 'node:path';
import {performance} from 'node:perf_hooks';

import {KilnError, loadModule, patternInput} from './kiln_runtime.mjs';

function usage(message) {
  throw new KilnError(`${message} (usage: run_model.mjs DIR [--input IN.raw]... [--output OUT.raw]... ` +
                      '[--warmup N] [--repeat N] [--json])', 2);
}

function parseArgs(argv) {
  const args = {dir: null, inputs: [], outputs: [], warmup: 1, repeat: 0, json: false};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const count = () => {
      const v = value();
      if (!/^[0-9]+$/.test(v)) usage(`${a} needs a whole number, got '${v}'`);
      return Number(v);
    };
    if (a === '--input') args.inputs.push(value());
    else if (a === '--output') args.outputs.push(value());
    else if (a === '--warmup') args.warmup = count();
    else if (a === '--repeat') args.repeat = count();
    else if (a === '--json') args.json = true;
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else if (args.dir === null) args.dir = a;
    else usage(`unexpected argument ${a}`);
  }
  if (args.dir === null) usage('no module directory');
  return args;
}

async function readBytes(file) {
  try {
    return new Uint8Array(await readFile(file));
  } catch (e) {
    throw new KilnError(`${file}: cannot open file (${e.code ?? e.message})`, 6);
  }
}

function shapeText(t) {
  return `${t.name} ${t.dtype} [${t.shape.join(',')}]`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const module = await loadModule((name) => readBytes(path.join(args.dir, name)), args.dir);
  if (args.inputs.length > module.inputs.length)
    throw new KilnError(`${args.dir}: the model takes ${module.inputs.length} input(s), got ${args.inputs.length} --input files`, 5);
  if (args.outputs.length > module.outputs.length)
    throw new KilnError(`${args.dir}: the model has ${module.outputs.length} output(s), got ${args.outputs.length} --output files`, 5);
  const inputs = [];
  for (const [i, info] of module.inputs.entries()) {
    if (i < args.inputs.length) inputs.push(await readBytes(args.inputs[i]));
    else inputs.push(patternInput(info));
  }
  module.setInputs(inputs);
  const firstStart = performance.now();
  module.execute();
  const firstMs = performance.now() - firstStart;
  const samplesMs = [];
  if (args.repeat > 0) {
    for (let w = 1; w < args.warmup; ++w) module.execute();  // the first run above is warm-up 1
    for (let r = 0; r < args.repeat; ++r) {
      const start = performance.now();
      module.execute();
      samplesMs.push(performance.now() - start);
    }
  }
  const outputs = module.readOutputs();
  for (const [i, file] of args.outputs.entries()) {
    const d = outputs[i].data;
    try {
      await writeFile(file, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
    } catch (e) {
      throw new KilnError(`${file}: cannot write file (${e.code ?? e.message})`, 6);
    }
  }
  if (args.json) {
    const sorted = [...samplesMs].sort((a, b) => a - b);
    const median = sorted.length ? (sorted[(sorted.length - 1) >> 1] + sorted[sorted.length >> 1]) / 2 : null;
    console.log(JSON.stringify({inputs: module.inputs, outputs: outputs.map(({name, dtype, shape}) => ({name, dtype, shape})),
                                first_ms: firstMs, samples_ms: samplesMs, median_ms: median,
                                node_version: process.versions.node, v8_version: process.versions.v8,
                                target: module.info.target}));
    return;
  }
  module.inputs.forEach((t, i) => console.log(`input ${i}: ${shapeText(t)}`));
  outputs.forEach((t, i) => {
    console.log(`output ${i}: ${shapeText(t)}`);
    if (t.dtype !== 'f32' && t.dtype !== 'f64') return;
    let sum = 0, best = 0;
    t.data.forEach((v, k) => {
      sum += v;
      if (v > t.data[best]) best = k;
    });
    const first = Array.from(t.data.subarray(0, 5), (v) => v.toFixed(6)).join(' ');
    console.log(`  first: ${first}  sum: ${sum.toFixed(6)}  argmax: ${best}`);
  });
  if (samplesMs.length) console.log(`runs: ${samplesMs.map((v) => v.toFixed(3)).join(' ')} ms`);
}

main().catch((e) => {
  const message = e instanceof KilnError ? e.message : `internal: ${e.stack ?? e}`;
  process.stderr.write(`error: ${message.split('\n')[0]}\n`);
  process.exit(e instanceof KilnError ? e.exitCode : 70);
});
