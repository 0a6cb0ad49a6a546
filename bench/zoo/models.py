"""The zoo's registry: real models built by their own libraries (torchvision, timm, transformers,
and a few written here in plain PyTorch), with random weights from a fixed seed, each with its
example inputs, its family and, where the full model is too big for a small CPU, a CPU-sized variant
of the same architecture (fewer layers, a smaller width or a smaller input).

The ten models of bench/gpu/run.py's suite are imported from there (and, through it, from
tests/real_models/check_real_models.py), never copied, so the two benchmarks measure the same
networks. Detection models stop at their heads: anchor decoding and non-maximum suppression
depend on the data (boxes kept per image) and are left out, as ONNX exports of them usually are.

Every entry: zoo()[name] -> Entry(family, source, full, cpu), where full and cpu are Variants
(constructor, input specs); cpu is None where the full model already suits a CPU.
"""
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def _load(name, path):
    """A module from a file path: bench/gpu/run.py cannot be imported as `run` (this folder's
    run.py would shadow it)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def gpu_bench():
    """bench/gpu/run.py as a module (its suite and its CUDA timing helpers)."""
    return _load("orch_gpu_bench", os.path.join(ROOT, "bench", "gpu", "run.py"))


def real_models():
    """tests/real_models/check_real_models.py (randomize, Wrap, the shared model zoo)."""
    gpu_bench()  # it puts tests/real_models on the path and imports the module
    return sys.modules["check_real_models"]


@dataclass
class Input:
    """One graph input: float (standard normal) or int64 token ids in [0, high)."""
    name: str
    shape: tuple
    high: Optional[int] = None  # int64 ids below this; None: float32

    def make(self, gen):
        if self.high is not None:
            return torch.randint(0, self.high, self.shape, generator=gen, dtype=torch.int64)
        return torch.randn(*self.shape, generator=gen)


@dataclass
class Variant:
    ctor: Callable[[], nn.Module]
    inputs: list  # of Input

    def describe(self):
        return ", ".join(("ids " if i.high else "") + "x".join(map(str, i.shape)) for i in self.inputs)


@dataclass
class Entry:
    family: str
    source: str  # which library builds it, and how
    full: Variant
    cpu: Optional[Variant] = None  # None: the full model is CPU-sized
    outputs: list = field(default_factory=lambda: ["output"])
    note: str = ""

    def variant(self, target):
        return self.cpu if target == "cpu" and self.cpu is not None else self.full


def img(*shape):
    return [Input("input", tuple(shape))]


# ---- models written here in plain PyTorch ----

class UNet(nn.Module):
    """The classic UNet: double 3x3 conv + BatchNorm + ReLU per level, max-pool down, 2x2
    transposed convolution (stride 2) up, skip connections concatenated."""

    @staticmethod
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True))

    def __init__(self, cin=3, classes=2, base=32, depth=4):
        super().__init__()
        ch = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([self.block(cin, ch[0])] +
                                  [self.block(ch[i], ch[i + 1]) for i in range(depth)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(ch[i + 1], ch[i], 2, stride=2)
                                for i in reversed(range(depth)))
        self.dec = nn.ModuleList(self.block(2 * ch[i], ch[i]) for i in reversed(range(depth)))
        self.head = nn.Conv2d(ch[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else nn.functional.max_pool2d(x, 2))
            skips.append(x)
        for up, dec, s in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), s], dim=1))
        return self.head(x)


class RNNTagger(nn.Module):
    """A recurrent sequence model: a stacked LSTM or GRU over the sequence, a linear layer on every
    step's hidden state (what torch.onnx exports as ONNX LSTM / GRU nodes)."""

    def __init__(self, cell="lstm", features=64, hidden=128, layers=2, classes=32):
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(features, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


class MLP(nn.Module):
    """A plain MLP: Linear + ReLU layers of one width, a linear last layer."""

    def __init__(self, width=1024, layers=4):
        super().__init__()
        mods = []
        for i in range(layers):
            mods.append(nn.Linear(width, width))
            if i + 1 < layers:
                mods.append(nn.ReLU())
        self.net = nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


class DetectionHeads(nn.Module):
    """A torchvision detector's backbone (+ FPN or extra layers) and its classification and box
    regression heads, without the data-dependent post-processing (anchor decoding, score
    threshold, NMS) and without the input transform's resize: two outputs, class logits and box
    deltas per anchor."""

    def __init__(self, det):
        super().__init__()
        self.backbone, self.head = det.backbone, det.head

    def forward(self, x):
        feats = list(self.backbone(x).values())
        out = self.head(feats)
        return out["cls_logits"], out["bbox_regression"]


class Out(nn.Module):
    """Picks one tensor out of a library model's output (a dict, a ModelOutput, a tuple) and calls
    the model with named inputs."""

    def __init__(self, m, fn):
        super().__init__()
        self.m, self.fn = m, fn

    def forward(self, *xs):
        return self.fn(self.m, *xs)


# ---- the registry ----

def zoo():
    """name -> Entry, the bench/gpu suite first."""
    import timm
    import torchvision
    import transformers
    tv = torchvision.models
    gpu = gpu_bench()
    z = {}

    # bench/gpu's suite: the same constructors and shapes; CPU variants shrink the inputs
    gpu_family = {"style_transfer": "image-to-image", "segformer_b0": "segmentation",
                  "efficientvit_b0": "vision transformer", "cspdarknet53": "convnet",
                  "mobilenet_v2": "convnet", "resnet18": "convnet",
                  "vit_b_16": "vision transformer", "bert_base": "encoder transformer",
                  "transformer_block": "encoder transformer", "mlp_sin_sigmoid": "mlp"}
    gpu_cpu_shape = {"style_transfer": (1, 3, 128, 128), "segformer_b0": (1, 3, 256, 256),
                     "cspdarknet53": (1, 3, 224, 224), "transformer_block": (1, 128, 768),
                     "mlp_sin_sigmoid": (4096, 64)}
    for name, (ctor, shape) in gpu.suite().items():
        cpu = gpu_cpu_shape.get(name)
        z[name] = Entry(gpu_family[name], "bench/gpu/run.py suite", Variant(ctor, img(*shape)),
                        Variant(ctor, img(*cpu)) if cpu else None)

    def tvm(fn, **kw):
        return lambda: getattr(tv, fn)(weights=None, **kw)

    def timm_m(name, **kw):
        return lambda: timm.create_model(name, pretrained=False, **kw)

    # ConvNets
    z["resnet50"] = Entry("convnet", "torchvision resnet50", Variant(tvm("resnet50"), img(1, 3, 224, 224)),
                          Variant(tvm("resnet50"), img(1, 3, 160, 160)))
    z["convnext_tiny"] = Entry("convnet", "torchvision convnext_tiny",
                               Variant(tvm("convnext_tiny"), img(1, 3, 224, 224)),
                               Variant(tvm("convnext_tiny"), img(1, 3, 128, 128)))
    z["efficientnet_b0"] = Entry("convnet", "torchvision efficientnet_b0",
                                 Variant(tvm("efficientnet_b0"), img(1, 3, 224, 224)))
    z["regnet_y_400mf"] = Entry("convnet", "torchvision regnet_y_400mf",
                                Variant(tvm("regnet_y_400mf"), img(1, 3, 224, 224)))
    z["mobilenet_v3_large"] = Entry("convnet", "torchvision mobilenet_v3_large",
                                    Variant(tvm("mobilenet_v3_large"), img(1, 3, 224, 224)))
    z["squeezenet1_1"] = Entry("convnet", "torchvision squeezenet1_1",
                               Variant(tvm("squeezenet1_1"), img(1, 3, 224, 224)))
    z["densenet121"] = Entry("convnet", "torchvision densenet121",
                             Variant(tvm("densenet121"), img(1, 3, 224, 224)),
                             Variant(tvm("densenet121"), img(1, 3, 128, 128)))

    # vision transformers and an all-MLP vision model
    z["deit_small"] = Entry("vision transformer", "timm deit_small_patch16_224",
                            Variant(timm_m("deit_small_patch16_224"), img(1, 3, 224, 224)))
    z["swin_t"] = Entry("vision transformer", "torchvision swin_t",
                        Variant(tvm("swin_t"), img(1, 3, 224, 224)))
    z["mixer_s16"] = Entry("mlp", "timm mixer_s16_224",
                           Variant(timm_m("mixer_s16_224"), img(1, 3, 224, 224)))

    # segmentation and detection (heads only: see DetectionHeads)
    def seg(fn, **kw):
        return lambda: Out(getattr(tv.segmentation, fn)(weights=None, weights_backbone=None, **kw),
                           lambda m, x: m(x)["out"])
    z["fcn_resnet50"] = Entry("segmentation", "torchvision segmentation.fcn_resnet50",
                              Variant(seg("fcn_resnet50", aux_loss=False), img(1, 3, 512, 512)),
                              Variant(seg("fcn_resnet50", aux_loss=False), img(1, 3, 160, 160)))
    z["deeplabv3_mobilenet"] = Entry("segmentation",
                                     "torchvision segmentation.deeplabv3_mobilenet_v3_large",
                                     Variant(seg("deeplabv3_mobilenet_v3_large", aux_loss=False),
                                             img(1, 3, 512, 512)),
                                     Variant(seg("deeplabv3_mobilenet_v3_large", aux_loss=False),
                                             img(1, 3, 224, 224)))
    z["lraspp_mobilenet"] = Entry("segmentation", "torchvision segmentation.lraspp_mobilenet_v3_large",
                                  Variant(seg("lraspp_mobilenet_v3_large"), img(1, 3, 512, 512)),
                                  Variant(seg("lraspp_mobilenet_v3_large"), img(1, 3, 224, 224)))

    def det(fn, **kw):
        return lambda: DetectionHeads(getattr(tv.detection, fn)(weights=None, weights_backbone=None,
                                                                **kw))
    z["retinanet_resnet50_fpn"] = Entry(
        "detection", "torchvision detection.retinanet_resnet50_fpn: backbone + FPN + heads",
        Variant(det("retinanet_resnet50_fpn"), img(1, 3, 512, 512)),
        Variant(det("retinanet_resnet50_fpn"), img(1, 3, 192, 192)),
        outputs=["cls_logits", "bbox_regression"],
        note="no anchor decoding / NMS (data-dependent)")
    z["ssdlite320"] = Entry(
        "detection", "torchvision detection.ssdlite320_mobilenet_v3_large: backbone + heads",
        Variant(det("ssdlite320_mobilenet_v3_large"), img(1, 3, 320, 320)),
        outputs=["cls_logits", "bbox_regression"],
        note="no anchor decoding / NMS (data-dependent)")
    z["unet"] = Entry("segmentation", "plain PyTorch UNet (ConvTranspose2d up)",
                      Variant(lambda: UNet(base=32), img(1, 3, 256, 256)),
                      Variant(lambda: UNet(base=16), img(1, 3, 128, 128)))

    # decoder transformers (transformers, random weights from a config); the attention mask all
    # ones, as a tokenizer gives for one unpadded sequence (without it transformers looks for
    # packed sequences with torch.diff, which the exporter lacks)
    def eager(cfg):
        # attention written out as MatMul-Softmax-MatMul (what a plain export carries), not SDPA
        cfg._attn_implementation = "eager"
        return cfg

    def gpt2(layers):
        cfg = transformers.GPT2Config(n_layer=layers)
        return lambda: Out(transformers.GPT2Model(eager(cfg)).eval(),
                           lambda m, ids: m(input_ids=ids, attention_mask=torch.ones_like(ids),
                                             use_cache=False).last_hidden_state)
    z["gpt2"] = Entry("decoder transformer", "transformers GPT2Model (GPT-2 small config)",
                      Variant(gpt2(12), [Input("input_ids", (1, 128), 50257)]),
                      Variant(gpt2(4), [Input("input_ids", (1, 64), 50257)]),
                      note="CPU variant: 4 of the 12 layers")

    def llama(hidden, layers, heads, kv, ff):
        cfg = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=ff,
                                       num_hidden_layers=layers, num_attention_heads=heads,
                                       num_key_value_heads=kv, vocab_size=32000,
                                       max_position_embeddings=2048)
        return lambda: Out(transformers.LlamaModel(eager(cfg)).eval(),
                           lambda m, ids: m(input_ids=ids, attention_mask=torch.ones_like(ids),
                                             use_cache=False).last_hidden_state)
    z["llama"] = Entry("decoder transformer",
                       "transformers LlamaModel (RMSNorm, RoPE, grouped-query attention, SiLU gate)",
                       Variant(llama(1024, 4, 16, 4, 2816), [Input("input_ids", (1, 256), 32000)]),
                       Variant(llama(256, 2, 8, 2, 688), [Input("input_ids", (1, 64), 32000)]))

    # audio encoders
    def whisper(d, layers, heads, frames):
        cfg = transformers.WhisperConfig(d_model=d, encoder_layers=layers, encoder_attention_heads=heads,
                                         encoder_ffn_dim=4 * d, decoder_layers=1,
                                         decoder_attention_heads=heads, decoder_ffn_dim=4 * d,
                                         num_mel_bins=80, max_source_positions=frames // 2)
        return lambda: Out(transformers.WhisperModel(eager(cfg)).get_encoder().eval(),
                           lambda m, x: m(input_features=x).last_hidden_state)
    z["whisper_encoder"] = Entry("audio encoder",
                                 "transformers WhisperModel encoder (Conv1d x2 + GELU + transformer)",
                                 Variant(whisper(512, 6, 8, 3000), img(1, 80, 3000)),
                                 Variant(whisper(256, 2, 4, 500), img(1, 80, 500)),
                                 note="full: whisper-base's encoder shape (30 s of audio)")

    def wav2vec2(hidden, layers, heads, conv):
        cfg = transformers.Wav2Vec2Config(hidden_size=hidden, num_hidden_layers=layers,
                                          num_attention_heads=heads, intermediate_size=4 * hidden,
                                          conv_dim=(conv,) * 7)
        return lambda: Out(transformers.Wav2Vec2Model(eager(cfg)).eval(),
                           lambda m, x: m(input_values=x).last_hidden_state)
    z["wav2vec2"] = Entry("audio encoder", "transformers Wav2Vec2Model (conv feature encoder + transformer)",
                          Variant(wav2vec2(768, 12, 12, 512), img(1, 16000)),
                          Variant(wav2vec2(256, 2, 4, 128), img(1, 16000)),
                          note="full: wav2vec2-base's shape (1 s at 16 kHz)")

    # video: 3-D convolutions
    z["r3d_18"] = Entry("video (3-D conv)", "torchvision video.r3d_18",
                        Variant(lambda: tv.video.r3d_18(weights=None), img(1, 3, 16, 112, 112)),
                        Variant(lambda: tv.video.r3d_18(weights=None), img(1, 3, 8, 56, 56)))

    # recurrent models
    z["lstm"] = Entry("rnn", "torch.nn.LSTM (2 layers) + Linear",
                      Variant(lambda: RNNTagger("lstm", 256, 512), img(1, 128, 256)),
                      Variant(lambda: RNNTagger("lstm", 64, 128), img(1, 32, 64)))
    z["gru"] = Entry("rnn", "torch.nn.GRU (2 layers) + Linear",
                     Variant(lambda: RNNTagger("gru", 256, 512), img(1, 128, 256)),
                     Variant(lambda: RNNTagger("gru", 64, 128), img(1, 32, 64)))

    z["mlp_relu"] = Entry("mlp", "plain PyTorch: 4 Linear layers 1024 wide, ReLU",
                          Variant(lambda: MLP(1024, 4), img(256, 1024)))
    return z


def build(entry, target, seed=0):
    """(model in eval mode with random weights, inputs tuple) for a target's variant: parameters
    from a fixed seed, zero-initialised ones made random and BatchNorm statistics calibrated as
    tests/real_models/check_real_models.py does, inputs from another fixed seed."""
    v = entry.variant(target)
    torch.manual_seed(seed)
    model = v.ctor().eval()
    floats = [i for i in v.inputs if i.high is None]
    # randomize calibrates BatchNorm with model(randn(2, ...)): only models with one float input
    # have BatchNorm here; for the others it only re-draws zero and 1-D parameters
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    if has_bn and len(v.inputs) != 1 or has_bn and not floats:
        raise ValueError("BatchNorm calibration needs a single float input")
    model = real_models().randomize(model, v.inputs[0].shape)
    gen = torch.Generator().manual_seed(2)
    xs = tuple(i.make(gen) for i in v.inputs)
    return model, xs
