from datetime import date, timedelta


def business_days(start, end, holidays):
    """Count the weekdays from start to end (ISO dates, both included) that are not holidays."""
    first = date.fromisoformat(start)
    last = date.fromisoformat(end)
    off = {date.fromisoformat(day) for day in holidays}
    count = 0
    day = first
    while day <= last:
        if day.weekday() < 5 and day not in off:
            count += 1
        day += timedelta(days=1)
    return count
