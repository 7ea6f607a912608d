-- Schema version 4: the backends are today's engines (PyTorch, torch.compile, ONNX Runtime,
-- OpenVINO in Python workers, TorchScript-optimized and Kiln in `kiln measure-worker`). Each
-- measurement keeps what its worker reported about itself: versions, BLAS/oneDNN/MKL builds,
-- thread settings, how the module was obtained ({"torch_version": ..., "intra_op_threads": 2, ...};
-- '{}' for rows measured before or that did not run).
ALTER TABLE measurements ADD COLUMN facts TEXT NOT NULL DEFAULT '{}';
