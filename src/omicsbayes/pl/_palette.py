"""Colours and markers that tell groups apart."""

import matplotlib as mpl

_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def group_styles(n):
    """``n`` (colour, marker) pairs for ``n`` groups.

    Up to 10 groups: matplotlib's ``tab10``; up to 20: ``tab20`` with its ten dark shades first
    and the ten light ones after, so that neighbouring groups differ in hue. Beyond 20 the
    colours repeat with another marker.

    Examples
    --------
    >>> from omicsbayes import pl
    >>> styles = pl.group_styles(12)  # one (colour, marker) pair per group
    >>> len(styles)
    12
    >>> len(set(colour for colour, _ in styles))
    12
    """
    if n <= 10:
        colours = list(mpl.colormaps["tab10"].colors)
    else:
        tab20 = mpl.colormaps["tab20"].colors
        colours = [tab20[i] for i in (*range(0, 20, 2), *range(1, 20, 2))]
    return [
        (colours[i % len(colours)], _MARKERS[(i // len(colours)) % len(_MARKERS)]) for i in range(n)
    ]
