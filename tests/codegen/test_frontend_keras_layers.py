"""Keras layers the front end gained for MobileNet-class and keyword-spotting networks (issue 26): grouped,
depthwise and separable convolutions, transposed convolution, up-sampling, the preprocessing layers
(Rescaling, Normalization) and cropping; generated C (V1, V2, V3) matches Keras within 1e-5."""

import pytest

import codegen

keras = pytest.importorskip("keras")
layers = keras.layers


def sequential(input_shape, *stack, name="net"):
    return keras.Sequential([keras.Input(input_shape), *stack], name=name)


def test_depthwise_separable_and_grouped_convolutions(check_keras):
    check_keras(sequential((9, 8, 4), layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2,
                                                             activation="relu6"),
                           layers.Conv2D(4, 1, groups=2),
                           layers.SeparableConv2D(6, (3, 2), dilation_rate=(1, 2), activation="relu"),
                           layers.DepthwiseConv2D(2, use_bias=False), name="depthwise"))


@pytest.mark.parametrize("padding, strides, kernel", [("valid", 2, 3), ("same", 2, 4)])
def test_conv2d_transpose(check_keras, padding, strides, kernel):
    check_keras(sequential((4, 5, 3), layers.Conv2DTranspose(2, kernel, strides=strides, padding=padding),
                           name=f"transpose_{padding}_{strides}_{kernel}"))


def test_upsampling_nearest_and_bilinear(check_keras):
    check_keras(sequential((3, 4, 2), layers.UpSampling2D((2, 3)), layers.Conv2D(2, 2),
                           layers.UpSampling2D(2, interpolation="bilinear"), name="upsampling"))


def test_rescaling_normalization_and_cropping(check_keras):
    result = check_keras(sequential((6, 7, 3), layers.Rescaling(1.0 / 127.5, offset=-1.0, name="rescaling"),
                                    layers.Normalization(mean=[0.1, -0.2, 0.3], variance=[0.5, 2.0, 4.0],
                                                         name="normalization"),
                                    layers.Cropping2D(((1, 2), (0, 3))), layers.Conv2D(2, 1), name="preprocessing"),
                         low=0.0, high=255.0)
    names = [layer["name"] for layer in result.manifest["layers"]]
    assert {"rescaling_0", "rescaling", "normalization_0", "normalization"} <= set(names)


def test_conv2d_transpose_with_stride_above_kernel_is_refused(tmp_path):
    model = sequential((4, 4, 2), layers.Conv2DTranspose(2, 2, strides=3), name="wide")
    model.save(tmp_path / "wide.keras")
    with pytest.raises(codegen.UnsupportedModel, match=r"layer 'conv2d_transpose\w*' \(Conv2DTranspose\) has an "
                                                        "output"):
        codegen.generate(tmp_path / "wide.keras", tmp_path / "out", frontend="keras")


def test_squeeze_and_excite_blocks(check_keras):
    """MobileNetV3's and EfficientNet's squeeze-and-excite (issue 43): a (1, 1, C) gate broadcast against the
    (H, W, C) map by Multiply, Add and Subtract in both operand orders; hard_silu, hard_sigmoid (as Keras 3 ops,
    ``relu6(x + 3) * (1/6)``), silu and sigmoid; the Rescaling and Normalization input layers."""
    x = keras.Input((5, 6, 3))
    y = layers.Normalization(mean=[0.4, 0.5, 0.6], variance=[0.05, 0.06, 0.07])(layers.Rescaling(1.0 / 255.0)(x))
    y = layers.Conv2D(4, 3, padding="same", activation="hard_silu")(y)
    gate = layers.Conv2D(4, 1)(layers.Conv2D(2, 1, activation="relu")(layers.GlobalAveragePooling2D(keepdims=True)(y)))
    y = layers.Multiply()([y, layers.ReLU(6.0)(gate + 3.0) * (1.0 / 6.0)])
    y = layers.DepthwiseConv2D(3, padding="same", activation="silu")(y)
    gate = layers.Reshape((1, 1, 4))(layers.GlobalAveragePooling2D()(y))
    gate = layers.Conv2D(4, 1, activation="sigmoid")(layers.Conv2D(2, 1, activation="swish")(gate))
    y = layers.Concatenate()([layers.Multiply()([gate, y]), layers.Add()([gate, y]), layers.Subtract()([gate, y]),
                              layers.Subtract()([y, gate])])
    y = layers.Activation("hard_sigmoid")(layers.Conv2D(3, 1)(y))
    check_keras(keras.Model(x, layers.Flatten()(y), name="squeeze_excite"), low=0.0, high=255.0)
