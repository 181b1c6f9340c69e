import re

text = open("contract.md", encoding="utf-8").read()

def amount(pattern):
    return int(re.search(pattern + r" [A-Z]{3} ([\d,]+)", text).group(1).replace(",", ""))

term = int(re.search(r"runs for [\w-]+ \((\d+)\) months", text).group(1))
setup = amount(r"onboarding fee of")
fee = amount(r"monthly service fee of")
m = re.search(r"from month (\d+) of the term \(inclusive\).*?fee becomes [A-Z]{3} ([\d,]+)", text, re.S)
start, new_fee = int(m.group(1)), int(m.group(2).replace(",", ""))
print(setup + fee * (start - 1) + new_fee * (term - start + 1))
