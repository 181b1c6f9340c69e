import re
from collections import Counter


def top_words(text, k):
    """Return the k most frequent words of text as [word, count] pairs."""
    counts = Counter(re.findall(r"[a-z]+", text.lower()))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [[word, count] for word, count in ranked[:k]]
