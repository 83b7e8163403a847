"""A tiny helper for writing layer lists the way Caffe prototxts read."""

from __future__ import annotations

from .spec import Layer, ModelSpec, Shape


class Builder:
    """Append layers; each method returns the new layer's name so calls chain like a prototxt."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []
        self.aux = False

    def add(self, name: str, kind: str, bottoms: str | tuple[str, ...] | list[str], **kw) -> str:
        if isinstance(bottoms, str):
            bottoms = (bottoms,)
        self.layers.append(Layer(name=name, kind=kind, bottoms=tuple(bottoms), aux=self.aux, **kw))
        return name

    def conv(self, name: str, bottom: str, num_output: int, kernel: int | tuple[int, int],
             stride: int = 1, pad: int | tuple[int, int] = 0, group: int = 1,
             bias: bool = True) -> str:
        """A convolution; ``kernel`` and ``pad`` may be (height, width) pairs."""
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, None)
        ph, pw = pad if isinstance(pad, tuple) else (pad, None)
        return self.add(name, "conv", bottom, num_output=num_output, kernel=kh, kernel_w=kw,
                        stride=stride, pad=ph, pad_w=pw, group=group, bias=bias)

    def fc(self, name: str, bottom: str, num_output: int) -> str:
        return self.add(name, "fc", bottom, num_output=num_output)

    def pool(self, name: str, bottom: str, kernel: int = 0, stride: int = 1, pad: int = 0,
             pool: str = "max", global_pool: bool = False, ceil: bool = True) -> str:
        return self.add(name, "pool", bottom, kernel=kernel, stride=stride, pad=pad,
                        pool=pool, global_pool=global_pool, ceil=ceil)

    def bn(self, name: str, bottom: str, affine: bool = False) -> str:
        """Batch norm; ``affine=True`` is PyTorch's BatchNorm2d (learnable scale/shift)."""
        return self.add(name, "bn", bottom, affine=affine)

    def eltwise(self, name: str, bottoms: tuple[str, ...]) -> str:
        return self.add(name, "eltwise", bottoms)

    def concat(self, name: str, bottoms: tuple[str, ...]) -> str:
        return self.add(name, "concat", bottoms)

    def relu(self, name: str, bottom: str) -> str:
        return self.add(name, "relu", bottom)

    def lrn(self, name: str, bottom: str, local_size: int = 5) -> str:
        return self.add(name, "lrn", bottom, local_size=local_size)

    def dropout(self, name: str, bottom: str) -> str:
        return self.add(name, "dropout", bottom)

    def spec(self, key: str, input_shape: Shape) -> ModelSpec:
        """The finished spec of registry model ``key`` (title and citation from its entry)."""
        from .registry import entry

        e = entry(key)
        return ModelSpec(key, e.title, e.citation, input_shape, tuple(self.layers))
