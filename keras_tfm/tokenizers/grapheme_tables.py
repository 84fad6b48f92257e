"""Extended grapheme cluster boundaries (UAX #29) in TF ops, as HuggingFace's `Precompiled` normaliser needs.

HuggingFace `tokenizers` applies a SentencePiece charsmap grapheme by grapheme
(see `precompiled_normalizer`), so the tokenizers that copy it need the
boundaries. The Grapheme_Cluster_Break classes are derived from Python's
`unicodedata` general categories plus the short lists of UAX #29 (Prepend,
Other_Grapheme_Extend, SpacingMark exceptions, Hangul syllable types), and the
pairwise rules GB3-GB9b are evaluated between neighbouring characters:

    GB3   CR x LF                         GB4/5  break after / before Control, CR, LF
    GB6-8 Hangul L, V, T, LV, LVT         GB9    x (Extend | ZWJ)
    GB9a  x SpacingMark                   GB9b   Prepend x

The context rules GB9c (Indic conjuncts), GB11 (emoji ZWJ sequences) and
GB12/13 (regional-indicator pairs) are not evaluated: each joins characters of
3 or more bytes into clusters of 6 bytes or more, which the normaliser treats
character by character anyway, so they change its output only for clusters
that also hold a 2-byte combining mark after such a join.
"""

import functools

import numpy as np
import tensorflow as tf

from keras_tfm.tokenizers import unicode_tables as U

OTHER, CR, LF, CONTROL, EXTEND, SPACING_MARK, PREPEND, L, V, T, LV, LVT = range(12)

_OTHER_GRAPHEME_EXTEND = [
    (0x09BE, 0x09BE),
    (0x09D7, 0x09D7),
    (0x0B3E, 0x0B3E),
    (0x0B57, 0x0B57),
    (0x0BBE, 0x0BBE),
    (0x0BD7, 0x0BD7),
    (0x0CC2, 0x0CC2),
    (0x0CD5, 0x0CD6),
    (0x0D3E, 0x0D3E),
    (0x0D57, 0x0D57),
    (0x0DCF, 0x0DCF),
    (0x0DDF, 0x0DDF),
    (0x1B35, 0x1B35),
    (0x200C, 0x200D),  # ZWNJ (Other_Grapheme_Extend) and ZWJ (its own class, joined the same way by GB9)
    (0x302E, 0x302F),
    (0xFF9E, 0xFF9F),
    (0x1133E, 0x1133E),
    (0x11357, 0x11357),
    (0x114B0, 0x114B0),
    (0x114BD, 0x114BD),
    (0x115AF, 0x115AF),
    (0x11930, 0x11930),
    (0x1D165, 0x1D165),
    (0x1D16E, 0x1D172),
    (0x1F3FB, 0x1F3FF),  # emoji modifiers (Extend by Emoji_Modifier=Yes)
    (0xE0020, 0xE007F),
]
_SPACING_MARK_EXCEPTIONS = [
    (0x102B, 0x102C),
    (0x1038, 0x1038),
    (0x1062, 0x1064),
    (0x1067, 0x106D),
    (0x1083, 0x1083),
    (0x1087, 0x108C),
    (0x108F, 0x108F),
    (0x109A, 0x109C),
    (0x1A61, 0x1A61),
    (0x1A63, 0x1A64),
    (0xAA7B, 0xAA7B),
    (0xAA7D, 0xAA7D),
    (0x11720, 0x11721),
]
_PREPEND = [
    (0x0600, 0x0605),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x0D4E, 0x0D4E),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x111C2, 0x111C3),
    (0x1193F, 0x1193F),
    (0x11941, 0x11941),
    (0x11A3A, 0x11A3A),
    (0x11A84, 0x11A89),
    (0x11D46, 0x11D46),
]


def _in(cps, ranges):
    inside = np.zeros(np.shape(cps), bool)
    for low, high in ranges:
        inside |= (low <= cps) & (cps <= high)
    return inside


def _tail_class(cp, category):
    if 0xE0020 <= cp <= 0xE007F or category == "Mn":
        return EXTEND
    return CONTROL if category == "Cf" else OTHER


@functools.cache
def grapheme_class_runs():
    """`(starts, classes)` int32 runs of the Grapheme_Cluster_Break class of every codepoint."""
    cps = np.arange(len(U.categories()))
    cats = U.categories()
    classes = np.full(len(cps), OTHER, np.int32)
    control = np.isin(cats, ["Zl", "Zp", "Cc", "Cf", "Cs"])
    classes[control] = CONTROL
    classes[np.isin(cats, ["Mc"]) & ~_in(cps, _SPACING_MARK_EXCEPTIONS)] = SPACING_MARK
    classes[np.isin(cps, [0x0E33, 0x0EB3])] = SPACING_MARK
    classes[np.isin(cats, ["Mn", "Me"]) | _in(cps, _OTHER_GRAPHEME_EXTEND)] = EXTEND
    classes[_in(cps, _PREPEND)] = PREPEND
    classes[_in(cps, [(0x1100, 0x115F), (0xA960, 0xA97C)])] = L
    classes[_in(cps, [(0x1160, 0x11A7), (0xD7B0, 0xD7C6)])] = V
    classes[_in(cps, [(0x11A8, 0x11FF), (0xD7CB, 0xD7FB)])] = T
    syllable = _in(cps, [(0xAC00, 0xD7A3)])
    classes[syllable] = np.where((cps[syllable] - 0xAC00) % 28 == 0, LV, LVT)
    classes[0x0D] = CR
    classes[0x0A] = LF
    return U.runs(classes, _tail_class)


def joins_previous(previous, current):
    """Bool tensor: no grapheme boundary between characters of classes `previous` and `current`."""

    def among(x, values):
        return tf.reduce_any(tf.equal(x[..., None], tf.constant(values, x.dtype)), axis=-1)

    breaking = among(previous, [CR, LF, CONTROL]) | among(current, [CR, LF, CONTROL])
    hangul = (
        (tf.equal(previous, L) & among(current, [L, V, LV, LVT]))
        | (among(previous, [LV, V]) & among(current, [V, T]))
        | (among(previous, [LVT, T]) & tf.equal(current, T))
    )
    joined = among(current, [EXTEND, SPACING_MARK]) | tf.equal(previous, PREPEND) | hangul
    return (tf.equal(previous, CR) & tf.equal(current, LF)) | (~breaking & joined)
