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

    def conv(self, name: str, bottom: str, num_output: int, kernel: int, stride: int = 1,
             pad: int = 0, group: int = 1, bias: bool = True) -> str:
        return self.add(name, "conv", bottom, num_output=num_output, kernel=kernel,
                        stride=stride, pad=pad, group=group, bias=bias)

    def fc(self, name: str, bottom: str, num_output: int) -> str:
        return self.add(name, "fc", bottom, num_output=num_output)

    def pool(self, name: str, bottom: str, kernel: int = 0, stride: int = 1, pad: int = 0,
             pool: str = "max", global_pool: bool = False) -> str:
        return self.add(name, "pool", bottom, kernel=kernel, stride=stride, pad=pad,
                        pool=pool, global_pool=global_pool)

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
