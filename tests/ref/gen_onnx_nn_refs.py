#!/usr/bin/env python3
# tests/ref/gen_onnx_nn_refs.py: writes small ONNX models of the nn ops (conv, pools, norms, RNNs, resize, DFT)
# with onnxruntime reference outputs to tests/data/onnx_nn/<case>/ (model.onnx, input_0.pb, output_K.pb).
# Cases cover variants the official node tests miss: groups with dilation and asymmetric pads, transposed
# conv with groups and output_padding, int8 pooling, RNNs with every optional input, resize by sizes, etc.
# Weights are initializers, input 0 is the only graph input.
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "onnx_nn")
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def case(name, op, x, inits, attrs, n_out=1, opset=17, out_names=None, inputs=None, feeds=None):
    """one node; inputs: names in order ('' = omitted), 'x' for the graph input; feeds: more graph inputs (name ->
    value), written as input_1.pb, ... in their order"""
    feeds = feeds or {}
    inits = {k: v for k, v in inits.items()}
    names = inputs or ["x"] + list(inits)
    outs = out_names or [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"{name}_node", **attrs)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", elem, x.shape)] +
                          [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                           for k, v in feeds.items()],
                          [helper.make_empty_tensor_value_info(o) for o in outs if o],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    res = sess.run(None, {"x": x, **feeds})
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    # declare the outputs' real types so the model is self-describing
    del m.graph.output[:]
    m.graph.output.extend([helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape)
                           for o, r in zip([o for o in outs if o], res)])
    onnx.save(m, os.path.join(d, "model.onnx"))
    for i, (k, v) in enumerate([("x", x)] + list(feeds.items())):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, k).SerializeToString())
    for i, r in enumerate(res):
        with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(r, f"out{i}").SerializeToString())
    print("wrote", name)


def main():
    case("conv_group_dilated_asym", "Conv", f32(2, 4, 9, 8), {"w": f32(6, 2, 3, 2), "b": f32(6)},
         dict(group=2, dilations=[2, 1], strides=[2, 3], pads=[1, 0, 2, 1]))
    case("conv1d_same_lower", "Conv", f32(1, 3, 10), {"w": f32(4, 3, 4)}, dict(auto_pad="SAME_LOWER", strides=[3]))
    case("conv3d_depthwise", "Conv", f32(1, 3, 5, 4, 4), {"w": f32(3, 1, 2, 3, 2)}, dict(group=3, pads=[1, 1, 0, 0, 1, 1]))
    case("convtranspose_group_outpad", "ConvTranspose", f32(1, 4, 3, 4), {"w": f32(4, 3, 3, 2), "b": f32(6)},
         dict(group=2, strides=[2, 3], output_padding=[1, 2], pads=[1, 0, 0, 1], dilations=[1, 2]))
    case("maxpool_int8_ceil", "MaxPool", rng.integers(-128, 127, (1, 2, 7, 6), dtype=np.int8), {},
         dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1), opset=12)
    case("avgpool_ceil_include_pad", "AveragePool", f32(1, 2, 7, 6), {},
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), opset=19)
    case("avgpool_same_upper_exclude", "AveragePool", f32(1, 1, 6, 5), {},
         dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"), opset=19)
    case("lppool_p3", "LpPool", f32(1, 2, 5, 5), {}, dict(kernel_shape=[2, 3], p=3, strides=[1, 2], pads=[0, 1, 1, 0]), opset=18)
    case("layernorm_outputs", "LayerNormalization", f32(2, 3, 4), {"s": f32(3, 4), "b": f32(4)}, dict(axis=1, epsilon=1e-3),
         n_out=3)
    case("instancenorm_3d", "InstanceNormalization", f32(2, 3, 4, 2, 3), {"s": f32(3), "b": f32(3)}, dict(epsilon=1e-4))
    case("lrn_size5", "LRN", f32(1, 6, 3, 3), {}, dict(size=5, alpha=0.01, beta=0.6, bias=2.0))
    h = 4
    case("lstm_bidir_full", "LSTM", f32(3, 2, 5),
         {"W": f32(2, 4 * h, 5), "R": f32(2, 4 * h, h), "B": f32(2, 8 * h), "h0": f32(2, 2, h), "c0": f32(2, 2, h),
          "P": f32(2, 3 * h)},
         dict(hidden_size=h, direction="bidirectional"), out_names=["Y", "Yh", "Yc"],
         inputs=["x", "W", "R", "B", "", "h0", "c0", "P"])
    case("gru_lbr_reverse_clip", "GRU", f32(4, 2, 3), {"W": f32(1, 3 * h, 3), "R": f32(1, 3 * h, h), "B": f32(2 * 3 * h).reshape(1, -1)},
         dict(hidden_size=h, direction="reverse", linear_before_reset=1, clip=1.5), out_names=["Y", "Yh"])
    case("rnn_relu_bidir_h0", "RNN", f32(2, 3, 3), {"W": f32(2, h, 3), "R": f32(2, h, h), "h0": f32(2, 3, h)},
         dict(hidden_size=h, direction="bidirectional", activations=["Relu", "Tanh"]),
         out_names=["Y", "Yh"], inputs=["x", "W", "R", "", "", "h0"], opset=14)
    case("resize_linear_sizes", "Resize", f32(1, 2, 4, 5), {"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32),
                                                            "sz": np.array([1, 2, 7, 3], np.int64)},
         dict(mode="linear"), opset=13)
    case("resize_cubic_asym_exclude", "Resize", f32(1, 1, 5, 6), {"roi": np.zeros(0, np.float32),
                                                                 "sc": np.array([1, 1, 1.6, 0.7], np.float32)},
         dict(mode="cubic", coordinate_transformation_mode="asymmetric", exclude_outside=1), opset=13)
    case("resize_nearest_ceil_align", "Resize", f32(1, 1, 3, 4), {"roi": np.zeros(0, np.float32),
                                                                  "sc": np.array([1, 1, 2.5, 1.5], np.float32)},
         dict(mode="nearest", coordinate_transformation_mode="align_corners", nearest_mode="ceil"), opset=13)
    case("dft_complex_axis1_len", "DFT", f32(2, 5, 3, 2), {"n": np.array(6, np.int64)}, dict(axis=1), opset=17)
    case("depthtospace_crd", "DepthToSpace", f32(1, 8, 2, 3), {}, dict(blocksize=2, mode="CRD"))
    # a window wider than twice the channels: the importer clamps it (the fuzzer's size=2^40 hung it)
    case("lrn_size_beyond_channels", "LRN", f32(1, 3, 2, 2), {}, dict(size=11, alpha=0.02, beta=0.75, bias=1.0))
    # ConvTranspose with k = s: one GEMM and a transpose (ir/conv_transpose.c tiles); SAME_UPPER at k = s pads nothing
    case("convtranspose_k2s2_bias", "ConvTranspose", f32(2, 5, 3, 4), {"w": f32(5, 3, 2, 2), "b": f32(3)},
         dict(strides=[2, 2]))
    case("convtranspose_k3s3_same_1d", "ConvTranspose", f32(1, 4, 5), {"w": f32(4, 2, 3)},
         dict(strides=[3], auto_pad="SAME_UPPER"))
    case("convtranspose_k2x1x3_3d", "ConvTranspose", f32(1, 2, 2, 3, 2), {"w": f32(2, 3, 2, 1, 3), "b": f32(3)},
         dict(strides=[2, 1, 3]))
    # strided ConvTranspose by stride phases (ir/conv_transpose.c phases): k > s with pads, output padding, groups,
    # k < s (phases without taps), SAME_UPPER
    case("convtranspose_k4s2p1_bias", "ConvTranspose", f32(1, 3, 5, 6), {"w": f32(3, 4, 4, 4), "b": f32(4)},
         dict(strides=[2, 2], pads=[1, 1, 1, 1]))
    case("convtranspose_k3s2_outpad_1d", "ConvTranspose", f32(2, 3, 7), {"w": f32(3, 2, 3)},
         dict(strides=[2], output_padding=[1], pads=[1, 0]))
    case("convtranspose_k5s3_group2", "ConvTranspose", f32(1, 4, 4, 5), {"w": f32(4, 3, 5, 2), "b": f32(6)},
         dict(group=2, strides=[3, 2], pads=[2, 0, 1, 1]))
    case("convtranspose_k1s3_gaps", "ConvTranspose", f32(1, 2, 3, 3), {"w": f32(2, 2, 1, 2)}, dict(strides=[3, 2]))
    case("convtranspose_k4s2_same_upper", "ConvTranspose", f32(1, 2, 4, 3), {"w": f32(2, 3, 4, 4)},
         dict(strides=[2, 2], auto_pad="SAME_UPPER"))
    # sequence_lens shorter than the sequence: steps past an entry's length keep its state and write zeros (a reverse
    # run starts at the entry's last step); given as an initializer, and as a graph input read at run time
    h = 4
    case("lstm_lens_bidir_peep", "LSTM", f32(5, 3, 3),
         {"W": f32(2, 4 * h, 3), "R": f32(2, 4 * h, h), "B": f32(2, 8 * h), "lens": np.array([5, 2, 3], np.int32),
          "h0": f32(2, 3, h), "c0": f32(2, 3, h), "P": f32(2, 3 * h)},
         dict(hidden_size=h, direction="bidirectional"), out_names=["Y", "Yh", "Yc"],
         inputs=["x", "W", "R", "B", "lens", "h0", "c0", "P"])
    case("gru_lens_reverse", "GRU", f32(4, 3, 2), {"W": f32(1, 3 * h, 2), "R": f32(1, 3 * h, h),
                                                  "B": f32(1, 6 * h), "lens": np.array([1, 4, 2], np.int32)},
         dict(hidden_size=h, direction="reverse"), out_names=["Y", "Yh"], inputs=["x", "W", "R", "B", "lens"])
    case("rnn_lens_forward", "RNN", f32(3, 2, 2), {"W": f32(1, h, 2), "R": f32(1, h, h), "lens": np.array([3, 1], np.int32)},
         dict(hidden_size=h), out_names=["Y", "Yh"], inputs=["x", "W", "R", "", "lens"])
    case("lstm_lens_input", "LSTM", f32(4, 2, 3), {"W": f32(1, 4 * h, 3), "R": f32(1, 4 * h, h)},
         dict(hidden_size=h), out_names=["Y", "Yh", "Yc"], inputs=["x", "W", "R", "", "lens"],
         feeds={"lens": np.array([2, 4], np.int32)})


if __name__ == "__main__":
    main()
