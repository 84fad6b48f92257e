"""`TransformerModel`: the base class of the model classes (`GPT`, `BertEncoder`, ...).

KerasHub's Backbone idea: a model is a *functional* `keras.Model` subclass.
Its constructor takes the hyperparameters, creates the layers, keeps them as
attributes (`token_embedding`, `blocks`, `final_norm`, `head`, ...), wires them
into a functional graph and hands the graph to `keras.Model.__init__`. So a
model is at the same time

* a plain functional model: `fit`, `predict`, mixed precision, XLA,
  distribution strategies, `clone_model` and `.keras` saving work unchanged;
  the layers and their names are those of the graph, so the weights file has
  the same layout as before the classes existed;
* an object: other packages (generation, export, inspection, checkpoint
  mappings) use its attributes and methods, never layer names.

`get_config()` returns the constructor arguments (`config` is the same dict
without `name`/`trainable`); `from_config(config)` calls the constructor, so a
`.keras` file stores the hyperparameters and the weights.
"""

import keras


def serialize_option(value):
    """A JSON-friendly form of an initializer / dtype policy argument."""
    if value is None or isinstance(value, (str, int, float, bool, dict, list, tuple)):
        return value
    if isinstance(value, keras.initializers.Initializer):
        return keras.initializers.serialize(value)
    if isinstance(value, keras.DTypePolicy):
        return keras.dtype_policies.serialize(value)
    return keras.saving.serialize_keras_object(value)


class TransformerModel(keras.Model):
    """Base of the keras_tfm model classes: stores the constructor arguments.

    Subclasses call `self._init_model(inputs, outputs, name, config)` at the end
    of their constructor (after creating their layers as local variables) and
    assign their layer attributes after it.
    """

    def _init_model(self, inputs, outputs, name, config, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._model_config = {key: serialize_option(value) for key, value in config.items()}

    @property
    def config(self):
        """The constructor arguments (hyperparameters) as a new dict."""
        return dict(self._model_config)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, **self.config}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)
