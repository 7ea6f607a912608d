"""ONNX forms for TorchScript ops that torch.onnx's TorchScript exporter has none of, so that a saved
TorchScript model using them still gets its ONNX export for the ONNX Runtime and OpenVINO rows.

aten::_transformer_encoder_layer_fwd: nn.TransformerEncoderLayer's fused fast path, which
tracing records whenever the layer ran in eval mode without gradients (batch_first, no mask
needing the slow path). It is written out here as the layer's own composite: QKV projection,
scaled dot-product attention per head, output projection, residuals and layer norms (before or
after, as the layer says), and the feed-forward pair with ReLU or exact GELU.
"""

_REGISTERED = set()


def register(torch, opset):
    """Registers the symbolics with torch.onnx for `opset` (once per opset and process)."""
    if opset in _REGISTERED:
        return
    torch.onnx.register_custom_op_symbolic("aten::_transformer_encoder_layer_fwd",
                                           _transformer_encoder_layer(torch), opset)
    _REGISTERED.add(opset)


def _transformer_encoder_layer(torch):
    from torch.onnx import symbolic_helper as sh

    def const(g, values, dtype=torch.int64):
        return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))

    def linear(g, x, w, b):
        return g.op("Add", g.op("MatMul", x, g.op("Transpose", w, perm_i=[1, 0])), b)

    # The arguments as aten declares them; mask_type stays a value (it may be None).
    @sh.parse_args("v", "i", "i", "v", "v", "v", "v", "b", "b", "f",
                   "v", "v", "v", "v", "v", "v", "v", "v", "v", "v")
    def symbolic(g, src, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps,
                 norm_w1, norm_b1, norm_w2, norm_b2, ffn_w1, ffn_b1, ffn_w2, ffn_b2, mask, mask_type):
        if not sh._is_none(mask):
            raise RuntimeError("aten::_transformer_encoder_layer_fwd with an attention mask has no ONNX "
                               "form here (export the model from eager PyTorch instead)")
        e, h = embed_dim, num_heads
        d = e // h

        def norm(x, w, b):
            return g.op("LayerNormalization", x, w, b, axis_i=-1, epsilon_f=eps)

        def attention(x):  # x: [batch, tokens, e]
            q, k, v = g.op("Split", linear(g, x, qkv_w, qkv_b), const(g, [e, e, e]), axis_i=2, outputs=3)
            heads = const(g, [0, 0, h, -1])  # 0: keep that dimension; -1: the rest (d)
            q = g.op("Transpose", g.op("Reshape", q, heads), perm_i=[0, 2, 1, 3])  # [b, h, t, d]
            k = g.op("Transpose", g.op("Reshape", k, heads), perm_i=[0, 2, 3, 1])  # [b, h, d, t]
            v = g.op("Transpose", g.op("Reshape", v, heads), perm_i=[0, 2, 1, 3])
            scores = g.op("Mul", g.op("MatMul", q, k), const(g, d ** -0.5, torch.float32))
            context = g.op("MatMul", g.op("Softmax", scores, axis_i=-1), v)
            context = g.op("Reshape", g.op("Transpose", context, perm_i=[0, 2, 1, 3]), const(g, [0, 0, -1]))
            return linear(g, context, proj_w, proj_b)

        def feed_forward(x):
            hidden = linear(g, x, ffn_w1, ffn_b1)
            if use_gelu:  # exact GELU, 0.5 x (1 + erf(x / sqrt 2)): ONNX has a Gelu op only from opset 20
                erf = g.op("Erf", g.op("Mul", hidden, const(g, 0.5 ** 0.5, torch.float32)))
                hidden = g.op("Mul", g.op("Mul", hidden, const(g, 0.5, torch.float32)),
                              g.op("Add", erf, const(g, 1.0, torch.float32)))
            else:
                hidden = g.op("Relu", hidden)
            return linear(g, hidden, ffn_w2, ffn_b2)

        x = src
        if norm_first:
            x = g.op("Add", x, attention(norm(x, norm_w1, norm_b1)))
            return g.op("Add", x, feed_forward(norm(x, norm_w2, norm_b2)))
        x = norm(g.op("Add", x, attention(x)), norm_w1, norm_b1)
        return norm(g.op("Add", x, feed_forward(x)), norm_w2, norm_b2)

    return symbolic
