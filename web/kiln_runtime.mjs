// Kiln's JavaScript runtime for WebAssembly modules: loads a module that
// `kiln compile MODEL --target "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128" -o DIR`
// wrote (graph.txt, params.bin, kernels.wasm; the format is runtime/module.h's), copies inputs into
// the wasm memory, runs the kernel calls in order and reads the outputs back.
//
// Plain ECMAScript with no imports, so the same file runs in Node (web/run_model.mjs) and in a
// browser page (web/run_page.html): the caller hands in the three files' bytes.
//
//   const module = await KilnModule.load({graphText, params, wasm});
//   const [logits] = module.run([new Float32Array(3 * 224 * 224)]);   // {name, dtype, shape, data}
//
// kernels.wasm exports one `void KERNEL(void* const* args)` per kernel (runtime/kernel_abi.h: an
// array of 32-bit pointers into the memory), the C string `kiln_module_signature`, the memory, and
// wasi-libc's aligned_alloc/free, with which every tensor is allocated once at load time. It needs
// no imports (a parallel launch runs its range on the calling thread; see
// codegen/llvm/wasm_runtime.h); a WASI import, should libc ever bring one, fails when called.

/** Element types by their graph.txt names: typed-array class and element size. */
export const DTYPES = {
  f32: {array: Float32Array, bytes: 4},
  f64: {array: Float64Array, bytes: 8},
  i64: {array: BigInt64Array, bytes: 8},
  i32: {array: Int32Array, bytes: 4},
  bool: {array: Uint8Array, bytes: 1},
  i8: {array: Int8Array, bytes: 1},
  u8: {array: Uint8Array, bytes: 1},
};

/** The module format version this runtime reads (runtime/module.h's kModuleFormatVersion). */
export const MODULE_FORMAT_VERSION = 1;

/** An error with the exit code runtime/error.h gives its kind (3 invalid model, 5 invalid input, ...). */
export class KilnError extends Error {
  constructor(message, exitCode = 5) {
    super(message);
    this.name = 'KilnError';
    this.exitCode = exitCode;
  }
}

const INVALID_MODEL = 3;
const INVALID_INPUT = 5;
const INCOMPATIBLE_MODULE = 9;
const KERNEL_FAULT = 7;

function unescapeName(token, fail) {
  if (token === '%') return '';
  let out = '';
  for (let i = 0; i < token.length; ++i) {
    if (token[i] !== '%') {
      out += token[i];
      continue;
    }
    const hex = token.substr(i + 1, 2);
    if (!/^[0-9a-fA-F]{2}$/.test(hex)) fail(`bad escaped name '${token}'`);
    out += String.fromCharCode(parseInt(hex, 16));
    i += 2;
  }
  return out;
}

function parseShape(token, fail) {
  if (!/^\[[0-9,]*\]$/.test(token)) fail(`bad shape '${token}'`);
  const body = token.slice(1, -1);
  return body === '' ? [] : body.split(',').map((d) => {
    if (!/^[0-9]+$/.test(d)) fail(`bad shape '${token}'`);
    return Number(d);
  });
}

function parseInteger(token, fail, min = 0) {
  if (!/^-?[0-9]+$/.test(token) || Number(token) < min) fail(`bad number '${token}'`);
  return Number(token);
}

function numel(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Parses graph.txt (runtime/module.h) into {info, slots, calls, inputs, outputs, constants,
 * params}. Throws KilnError naming the line on anything malformed.
 */
export function parseGraph(text, file = 'graph.txt') {
  const lines = text.split('\n');
  const first = lines[0] ?? '';
  if (!first.startsWith('kiln-module '))
    throw new KilnError(`${file}: not a Kiln module (the first line must be 'kiln-module VERSION')`, INVALID_MODEL);
  const version = Number(first.slice('kiln-module '.length));
  if (version !== MODULE_FORMAT_VERSION)
    throw new KilnError(`${file}: module format version ${first.slice(12)}, this runtime reads version ` +
                        `${MODULE_FORMAT_VERSION}; recompile it with this Kiln`, INCOMPATIBLE_MODULE);
  const g = {info: {features: []}, slots: [], calls: [], inputs: [], outputs: [], constants: [], params: null};
  let ended = false;
  for (let n = 1; n < lines.length && !ended; ++n) {
    const text = lines[n];
    const tok = text.split(' ').filter((t) => t !== '');
    if (tok.length === 0) continue;
    const fail = (what) => {
      throw new KilnError(`${file}:${n + 1}: ${what}`, INVALID_MODEL);
    };
    const fields = (count) => {
      if (tok.length !== count + 1) fail(`'${tok[0]}' expects ${count} field(s), got ${tok.length - 1}`);
    };
    switch (tok[0]) {
      case 'kiln-version': fields(1); g.info.kilnVersion = tok[1]; break;
      case 'target': g.info.target = text.slice(7); break;
      case 'triple': fields(1); g.info.triple = tok[1]; break;
      case 'cpu': fields(1); g.info.cpu = tok[1]; break;
      case 'features': g.info.features = tok.slice(1); break;
      case 'library':
        fields(1);
        g.info.library = unescapeName(tok[1], fail);
        if (g.info.library.includes('/')) fail('the library must be a file name in the module');
        break;
      case 'signature': fields(1); g.info.signature = tok[1]; break;
      case 'params':
        fields(3);
        g.params = {file: unescapeName(tok[1], fail), bytes: parseInteger(tok[2], fail), checksum: tok[3]};
        break;
      case 'slot': {
        fields(6);
        if (parseInteger(tok[1], fail) !== g.slots.length) fail('slots must be numbered in order');
        if (!['input', 'constant', 'intermediate'].includes(tok[2])) fail(`unknown slot kind '${tok[2]}'`);
        if (!(tok[4] in DTYPES)) fail(`unknown dtype '${tok[4]}'`);
        g.slots.push({kind: tok[2], index: parseInteger(tok[3], fail, -1), dtype: tok[4],
                      shape: parseShape(tok[5], fail), name: unescapeName(tok[6], fail)});
        break;
      }
      case 'call': {
        fields(4);
        const args = tok[3] === '-' ? [] : tok[3].split(',').map((a) => parseInteger(a, fail));
        for (const a of args) if (a >= g.slots.length) fail(`call argument ${a} is not a slot`);
        const numOutputs = parseInteger(tok[2], fail);
        if (numOutputs > args.length) fail('more outputs than arguments');
        g.calls.push({kernel: unescapeName(tok[1], fail), numOutputs, args, node: unescapeName(tok[4], fail)});
        break;
      }
      case 'input':
      case 'output': {
        fields(1);
        const slot = parseInteger(tok[1], fail);
        if (slot >= g.slots.length) fail(`slot ${slot} is not defined`);
        (tok[0] === 'input' ? g.inputs : g.outputs).push(slot);
        break;
      }
      case 'constant': {
        fields(5);
        if (parseInteger(tok[1], fail) !== g.constants.length) fail('constants must be numbered in order');
        if (!(tok[2] in DTYPES)) fail(`unknown dtype '${tok[2]}'`);
        const c = {dtype: tok[2], shape: parseShape(tok[3], fail), offset: parseInteger(tok[4], fail),
                   bytes: parseInteger(tok[5], fail)};
        if (c.bytes !== numel(c.shape) * DTYPES[c.dtype].bytes) fail('constant size does not match its shape and dtype');
        if (c.offset % 64 !== 0) fail('constant offset is not 64-byte aligned');
        g.constants.push(c);
        break;
      }
      case 'end': ended = true; break;
      default: fail(`unknown record '${tok[0]}'`);
    }
  }
  if (!ended) throw new KilnError(`${file}: truncated (no 'end' line)`, INVALID_MODEL);
  if (!g.params) throw new KilnError(`${file}: no 'params' record`, INVALID_MODEL);
  g.slots.forEach((slot, s) => {
    const where = `${file}: slot ${s} ('${slot.name}')`;
    if (slot.kind === 'constant') {
      const c = g.constants[slot.index];
      if (!c) throw new KilnError(`${where} refers to a missing constant`, INVALID_MODEL);
      if (c.dtype !== slot.dtype || c.shape.join(',') !== slot.shape.join(','))
        throw new KilnError(`${where} does not match constant ${slot.index}`, INVALID_MODEL);
    }
    if (slot.kind === 'input' && g.inputs[slot.index] !== s)
      throw new KilnError(`${where} is not listed as input ${slot.index}`, INVALID_MODEL);
  });
  return g;
}

/** FNV-1a 64 of `bytes` as 16 hex digits (params.bin's checksum), in 16-bit limbs (no BigInt per byte). */
export function fnv1a64Hex(bytes) {
  let h0 = 0x2325, h1 = 0x8422, h2 = 0x9ce4, h3 = 0xcbf2;  // 0xcbf29ce484222325
  for (let i = 0; i < bytes.length; ++i) {
    h0 ^= bytes[i];
    // h *= 0x100000001b3 (mod 2^64): h * 0x1b3 + (h << 40).
    const t0 = h0 * 0x1b3;
    let t1 = h1 * 0x1b3, t2 = h2 * 0x1b3 + ((h0 & 0xff) << 8), t3 = h3 * 0x1b3 + ((h0 >>> 8) | ((h1 & 0xff) << 8));
    t1 += t0 >>> 16;
    h0 = t0 & 0xffff;
    t2 += t1 >>> 16;
    h1 = t1 & 0xffff;
    t3 += t2 >>> 16;
    h2 = t2 & 0xffff;
    h3 = t3 & 0xffff;
  }
  return [h3, h2, h1, h0].map((v) => v.toString(16).padStart(4, '0')).join('');
}

/** A loaded module: its tensors live in the wasm memory; run() copies inputs in and outputs out. */
export class KilnModule {
  /**
   * graphText: graph.txt as a string; params: params.bin's bytes; wasm: kernels.wasm's bytes
   * (Uint8Array or ArrayBuffer each). `name` prefixes error messages (the module directory).
   */
  static async load({graphText, params, wasm, name = 'module'}) {
    const graph = parseGraph(graphText, `${name}/graph.txt`);
    const paramBytes = params instanceof Uint8Array ? params : new Uint8Array(params);
    const paramsFile = `${name}/${graph.params.file}`;
    const magic = String.fromCharCode(...paramBytes.subarray(0, 8));
    if (paramBytes.length < 16 || magic !== 'KILNPRM1') throw new KilnError(`${paramsFile}: not a Kiln params file`, INVALID_MODEL);
    const declared = Number(new DataView(paramBytes.buffer, paramBytes.byteOffset, 16).getBigUint64(8, true));
    if (declared !== graph.params.bytes || paramBytes.length !== 16 + declared)
      throw new KilnError(`${paramsFile}: holds ${paramBytes.length} bytes, graph.txt expects ${16 + graph.params.bytes} ` +
                          '(truncated, or from another export)', INVALID_MODEL);
    const data = paramBytes.subarray(16);
    if (fnv1a64Hex(data) !== graph.params.checksum)
      throw new KilnError(`${paramsFile}: checksum mismatch (corrupted, or from another export)`, INVALID_MODEL);
    if (!/^wasm(32|64)/.test(graph.info.triple ?? ''))
      throw new KilnError(`${name}: kernels were compiled for ${graph.info.triple}, not WebAssembly ` +
                          '(compile with --target "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128")', INCOMPATIBLE_MODULE);

    let compiled;
    try {
      compiled = await WebAssembly.compile(wasm);
    } catch (e) {
      throw new KilnError(`${name}/${graph.info.library}: not a loadable WebAssembly module: ${e.message}`, INVALID_MODEL);
    }
    const imports = {};
    for (const imp of WebAssembly.Module.imports(compiled)) {
      if (imp.kind !== 'function') throw new KilnError(`${name}/${graph.info.library}: imports ${imp.module}.${imp.name}, which this runtime does not provide`, INVALID_MODEL);
      imports[imp.module] ??= {};
      imports[imp.module][imp.name] = () => {
        throw new KilnError(`${name}/${graph.info.library}: the kernels called ${imp.module}.${imp.name}, which this runtime does not provide`, KERNEL_FAULT);
      };
    }
    const instance = await WebAssembly.instantiate(compiled, imports);
    return new KilnModule(graph, data, instance, name);
  }

  constructor(graph, paramData, instance, name) {
    this.graph = graph;
    this.name = name;
    this.info = graph.info;
    this.exports = instance.exports;
    const lib = `${name}/${graph.info.library}`;
    for (const sym of ['memory', 'aligned_alloc', 'kiln_module_signature'])
      if (!(sym in this.exports)) throw new KilnError(`${lib}: does not export ${sym} (not a Kiln kernel module)`, INVALID_MODEL);
    const signature = this.#cString(this.exports.kiln_module_signature.value);
    if (signature !== graph.info.signature)
      throw new KilnError(`${lib}: belongs to another export (signature ${signature}, graph.txt says ${graph.info.signature})`, INVALID_MODEL);

    // One allocation per tensor slot (no lifetime sharing: wasm32 has 4 GiB and the sample models
    // fit many times over), constants copied in once, zeros elsewhere.
    this.slotPtr = graph.slots.map((slot) => {
      const bytes = numel(slot.shape) * DTYPES[slot.dtype].bytes;
      const ptr = this.exports.aligned_alloc(64, Math.max(64, Math.ceil(bytes / 64) * 64)) >>> 0;
      if (ptr === 0) throw new KilnError(`${name}: out of wasm memory for tensor '${slot.name}' (${bytes} bytes)`, INVALID_INPUT);
      return ptr;
    });
    graph.slots.forEach((slot, s) => {
      const bytes = numel(slot.shape) * DTYPES[slot.dtype].bytes;
      const heap = this.#heap();
      if (slot.kind === 'constant') {
        const c = graph.constants[slot.index];
        if (c.offset + c.bytes > paramData.length)
          throw new KilnError(`${name}/graph.txt: constant ${slot.index} lies outside ${graph.params.file}`, INVALID_MODEL);
        heap.set(paramData.subarray(c.offset, c.offset + c.bytes), this.slotPtr[s]);
      } else {
        heap.fill(0, this.slotPtr[s], this.slotPtr[s] + bytes);
      }
    });
    // The argument arrays (32-bit pointers), one per call, and the kernel functions.
    this.calls = graph.calls.map((call) => {
      const fn = this.exports[call.kernel];
      if (typeof fn !== 'function') throw new KilnError(`${lib}: kernel '${call.kernel}' is missing from the compiled library`, INVALID_MODEL);
      const argv = this.exports.aligned_alloc(16, Math.max(16, 4 * call.args.length)) >>> 0;
      return {fn, argv, kernel: call.kernel, node: call.node, args: call.args};
    });
    const words = new Uint32Array(this.exports.memory.buffer);
    for (const c of this.calls) c.args.forEach((slot, i) => { words[c.argv / 4 + i] = this.slotPtr[slot]; });
  }

  #heap() {
    return new Uint8Array(this.exports.memory.buffer);  // anew: the buffer changes when the memory grows
  }

  #cString(ptr) {
    const heap = this.#heap();
    let end = ptr;
    while (end < heap.length && heap[end] !== 0) ++end;
    return String.fromCharCode(...heap.subarray(ptr, end));
  }

  /** Inputs and outputs: [{name, dtype, shape}], in forward-argument / flattened output order. */
  get inputs() {
    return this.graph.inputs.map((s) => this.#describe(s));
  }
  get outputs() {
    return this.graph.outputs.map((s) => this.#describe(s));
  }
  #describe(s) {
    const {name, dtype, shape} = this.graph.slots[s];
    return {name, dtype, shape: [...shape]};
  }

  /** Copies `inputs` (typed arrays of each input's dtype and element count, or raw Uint8Array bytes) in. */
  setInputs(inputs) {
    if (inputs.length !== this.graph.inputs.length)
      throw new KilnError(`${this.name}: the model takes ${this.graph.inputs.length} input(s), got ${inputs.length}`, INVALID_INPUT);
    const heap = this.#heap();
    this.graph.inputs.forEach((s, i) => {
      const slot = this.graph.slots[s];
      const {array, bytes} = DTYPES[slot.dtype];
      const want = numel(slot.shape) * bytes;
      const given = inputs[i];
      if (!(given instanceof array) && !(given instanceof Uint8Array))
        throw new KilnError(`input ${i} ('${slot.name}') must be a ${array.name} (dtype ${slot.dtype})`, INVALID_INPUT);
      const raw = new Uint8Array(given.buffer, given.byteOffset, given.byteLength);
      if (raw.length !== want)
        throw new KilnError(`input ${i} ('${slot.name}') has ${raw.length} bytes, expected ${want} ` +
                            `(${slot.dtype} [${slot.shape.join(',')}])`, INVALID_INPUT);
      heap.set(raw, this.slotPtr[s]);
    });
  }

  /** Runs every kernel call in order on the inputs set last. */
  execute() {
    for (const c of this.calls) {
      try {
        c.fn(c.argv);
      } catch (e) {
        if (e instanceof WebAssembly.RuntimeError)
          throw new KilnError(`kernel '${c.kernel}' (node ${c.node}) trapped: ${e.message}`, KERNEL_FAULT);
        throw e;
      }
    }
  }

  /** Copies of the outputs: [{name, dtype, shape, data}] with `data` a typed array of the dtype. */
  readOutputs() {
    const buffer = this.exports.memory.buffer;
    return this.graph.outputs.map((s) => {
      const slot = this.graph.slots[s];
      const {array} = DTYPES[slot.dtype];
      const view = new array(buffer, this.slotPtr[s], numel(slot.shape));
      return {name: slot.name, dtype: slot.dtype, shape: [...slot.shape], data: view.slice()};
    });
  }

  /** One inference: setInputs, execute, readOutputs. */
  run(inputs) {
    this.setInputs(inputs);
    this.execute();
    return this.readOutputs();
  }
}

/**
 * Loads a module through `readFile(name) → Promise<Uint8Array>` (Node's fs, or fetch in a page).
 * `name` prefixes error messages.
 */
export async function loadModule(readFile, name = 'module') {
  const graphBytes = await readFile('graph.txt');
  const graphText = new TextDecoder().decode(graphBytes);
  const graph = parseGraph(graphText, `${name}/graph.txt`);
  const [params, wasm] = await Promise.all([readFile(graph.params.file), readFile(graph.info.library)]);
  return KilnModule.load({graphText, params, wasm, name});
}

/** The pattern Kiln's C example fills inputs without a file with (examples/c_api/run_model.c). */
export function patternInput({dtype, shape}) {
  const n = numel(shape);
  const out = new DTYPES[dtype].array(n);
  for (let i = 0; i < n; ++i) {
    if (dtype === 'f32' || dtype === 'f64') out[i] = Math.fround(((i * 37) % 101 - 50) / 25);
    else if (dtype === 'i64') out[i] = BigInt(i % 7);
    else if (dtype === 'i32') out[i] = i % 7;
    else out[i] = i % 2;
  }
  return out;
}
