"""`quantize()` for composite layers: delegate to the sublayers.

`keras.Model.quantize(mode)` quantizes the leaf layers of a model (Dense,
EinsumDense, ...). The composite keras_tfm layers hold no kernels of their own
and CALL those sublayers, so the quantized kernels and their scales are used
(see `attention/projections.py`). This mixin gives a standalone
composite layer the same `layer.quantize(mode)`: it quantizes the sublayers the
layer names in `_quantizable_sublayers()` (recursively for composite ones).
Norms, dropout and the embedding tables of `TokenEmbedding` stay as they are.
"""


class QuantizeSublayersMixin:
    """Adds `quantize(mode, type_check=True, config=None)` that quantizes the
    projection sublayers, as `keras.Model.quantize` does for a model.

    A class using it defines `_quantizable_sublayers()`, the list of its
    (built) sublayers with weights to quantize.
    """

    def _quantizable_sublayers(self):
        raise NotImplementedError

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantizes the projection sublayers (Dense / EinsumDense).

        Args:
            mode: "int8", "float8", "int4", ... (see `keras.Model.quantize`).
            type_check: passed on to the sublayers.
            config: optional `keras.quantizers.QuantizationConfig`.
        """
        for layer in self._quantizable_sublayers():
            if layer is not None:
                layer.quantize(mode, type_check=type_check, config=config)
