"""Integer helpers."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(x: int, y: int) -> int:
    return cdiv(x, y) * y
