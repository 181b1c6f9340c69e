def compare_versions(a, b):
    """Compare dotted version strings: -1 if a < b, 0 if equal, 1 if a > b."""
    pa = [int(part) for part in a.split(".")]
    pb = [int(part) for part in b.split(".")]
    width = max(len(pa), len(pb))
    pa += [0] * (width - len(pa))
    pb += [0] * (width - len(pb))
    return (pa > pb) - (pa < pb)
