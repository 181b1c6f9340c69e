import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Return the number of seconds in a duration such as "1h30m" or "2d 4h 5s"."""
    total = 0
    for number, unit in re.findall(r"(\d+)\s*([dhms])", text):
        total += int(number) * UNITS[unit]
    return total
