"""Cron expressions shared by the Python and the SQL tests, so both sides stay in agreement.

VALID: (expression, normal form). INVALID: (expression, fragment of the error message).
Every valid normal form is accepted by poller/cron.py, cronbox.normalize_cron and croniter;
every invalid expression is rejected by both sides with the same message.
"""

from __future__ import annotations

VALID: list[tuple[str, str]] = [
    # field counts: 5 = min..dow, 6 = seconds first, 7 = seconds first and year last
    ("* * * * *", "0 * * * * * *"),
    ("*/15 * * * *", "0 */15 * * * * *"),
    ("0 30 2 * * *", "0 30 2 * * * *"),
    ("*/2 * * * * *", "*/2 * * * * * *"),
    ("0 0 12 1 1 * 2030", "0 0 12 1 1 * 2030"),
    ("0 0 12 * * ? 2030-2035/2", "0 0 12 * * * 2030-2035/2"),
    ("0 0 0 1 1 * 2027,2029", "0 0 0 1 1 * 2027,2029"),
    ("0 0 0 * * * */4", "0 0 0 * * * */4"),
    # whitespace, leading zeros
    ("  0\t0  * *\n*  ", "0 0 0 * * * *"),
    ("007 08 09 10 *", "0 7 8 9 10 * *"),
    ("00 000 * * * *", "0 0 * * * * *"),
    # ranges, steps, lists
    ("0-59 0-23 1-31 1-12 0-7", "0 0-59 0-23 1-31 1-12 0-7 *"),
    ("10-20/5 * * * *", "0 10-20/5 * * * * *"),
    ("10/20 * * * *", "0 10/20 * * * * *"),
    ("59/15 * * * *", "0 59/15 * * * * *"),
    ("1,2,3-5,*/10 * * * *", "0 1,2,3-5,*/10 * * * * *"),
    ("5-5 * * * *", "0 5 * * * * *"),
    ("5-5/3 * * * *", "0 5 * * * * *"),
    ("*/60 * * * * *", "*/60 * * * * * *"),
    ("0 0 */24 * * *", "0 0 */24 * * * *"),
    ("0 0 0 * * * */50", "0 0 0 * * * */50"),
    ("0 9-17/2 * * 1-5", "0 0 9-17/2 * * 1-5 *"),
    ("0 0 31 * *", "0 0 0 31 * * *"),
    ("0 0 0 29 2 * *", "0 0 0 29 2 * *"),
    ("0 0 1-31 * MON", "0 0 0 1-31 * 1 *"),
    ("0 0 13 * 5", "0 0 0 13 * 5 *"),
    # names, any case
    ("5 4 * * sun", "0 5 4 * * 0 *"),
    ("0 9 * JAN-MAR MON-FRI", "0 0 9 * 1-3 1-5 *"),
    ("0 9 * jan,Jul,DEC *", "0 0 9 * 1,7,12 * *"),
    ("0 0 * * mon,wed,FRI", "0 0 0 * * 1,3,5 *"),
    ("0 0 1 feb/3 *", "0 0 0 1 2/3 * *"),
    # day of week: 0 and 7 are Sunday; a range may end on Sunday
    ("0 0 * * 7", "0 0 0 * * 7 *"),
    ("0 0 * * FRI-SUN", "0 0 0 * * 5-7 *"),
    ("0 0 * * 5-0", "0 0 0 * * 5-7 *"),
    ("0 0 * * SUN-SAT", "0 0 0 * * 0-6 *"),
    ("0 0 * * 1-7/2", "0 0 0 * * 1-7/2 *"),
    ("0 0 * * 1/2", "0 0 0 * * 1/2 *"),
    ("0 0 * * 7/2", "0 0 0 * * 0/2 *"),
    # ? in day-of-month / day-of-week
    ("0 0 ? * MON", "0 0 0 * * 1 *"),
    ("0 0 1 * ?", "0 0 0 1 * * *"),
    # L and #
    ("0 0 L * *", "0 0 0 L * * *"),
    ("0 0 l * *", "0 0 0 L * * *"),
    ("0 0 1,15,L * *", "0 0 0 1,15,L * * *"),
    ("0 0 * * 5L", "0 0 0 * * L5 *"),
    ("0 0 * * L5", "0 0 0 * * L5 *"),
    ("0 0 * * friL", "0 0 0 * * L5 *"),
    ("0 0 * * 5#3", "0 0 0 * * 5#3 *"),
    ("0 0 * * FRI#3,mon#1", "0 0 0 * * 5#3,1#1 *"),
    ("0 0 * * 1#1,L5", "0 0 0 * * 1#1,L5 *"),
    ("0 0 * * 7#2", "0 0 0 * * 7#2 *"),
    ("0 0 ? * 1#02", "0 0 0 * * 1#2 *"),
    # macros
    ("@yearly", "0 0 0 1 1 * *"),
    ("@annually", "0 0 0 1 1 * *"),
    ("@monthly", "0 0 0 1 * * *"),
    ("@weekly", "0 0 0 * * 0 *"),
    ("@daily", "0 0 0 * * * *"),
    ("@midnight", "0 0 0 * * * *"),
    ("@hourly", "0 0 * * * * *"),
    ("  @DAILY\t", "0 0 0 * * * *"),
]

INVALID: list[tuple[str, str]] = [
    ("", "cron: expression is empty"),
    (" \t\n ", "cron: expression is empty"),
    ("@reboot", 'cron: unsupported macro "@reboot"; use @yearly'),
    ("@every 5m", 'cron: unsupported macro "@every 5m"'),
    ("@daily 5", 'cron: unsupported macro "@daily 5"'),
    ("@", 'cron: unsupported macro "@"'),
    ("*", 'cron: expected 5, 6 or 7 fields, got 1 in "*"'),
    ("* * * *", 'cron: expected 5, 6 or 7 fields, got 4 in "* * * *"'),
    ("* * * * * * * *", "cron: expected 5, 6 or 7 fields, got 8"),
    ("0\u00a00 * * *", "cron: expected 5, 6 or 7 fields, got 4"),
    # out of range, per field
    ("61 * * * *", 'cron: minute field "61" is out of range 0-59 in "61 * * * *"'),
    ("1,61 * * * *", 'cron: minute field "61" is out of range 0-59'),
    ("50-70 * * * *", 'cron: minute field "50-70" is out of range 0-59'),
    ("60 * * * * *", 'cron: second field "60" is out of range 0-59'),
    ("* 24 * * *", 'cron: hour field "24" is out of range 0-23'),
    ("* * 0 * *", 'cron: day-of-month field "0" is out of range 1-31'),
    ("* * 32 * *", 'cron: day-of-month field "32" is out of range 1-31'),
    ("* * * 0 *", 'cron: month field "0" is out of range 1-12'),
    ("* * * 13 *", 'cron: month field "13" is out of range 1-12'),
    ("* * * * 8", 'cron: day-of-week field "8" is out of range 0-7'),
    ("0 0 0 1 1 * 1969", 'cron: year field "1969" is out of range 1970-2099'),
    ("0 0 0 1 1 * 2100", 'cron: year field "2100" is out of range 1970-2099'),
    ("0 0 * * * 2030", 'cron: day-of-week field "2030" is out of range 0-7'),
    ("99999999999999999999 * * * *", 'minute field "99999999999999999999" is out of range'),
    # reversed ranges
    ("5-1 * * * *", 'cron: minute field "5-1" is a reversed range'),
    ("0 22-2 * * *", 'cron: hour field "22-2" is a reversed range'),
    ("* * * DEC-JAN *", 'cron: month field "DEC-JAN" is a reversed range'),
    ("* * * * SAT-MON", 'cron: day-of-week field "SAT-MON" is a reversed range'),
    # steps
    ("*/0 * * * *", 'cron: minute field "*/0" has a step out of range 1-60'),
    ("1-5/0 * * * *", 'cron: minute field "1-5/0" has a step out of range 1-60'),
    ("*/61 * * * *", 'cron: minute field "*/61" has a step out of range 1-60'),
    ("0 */25 * * *", 'cron: hour field "*/25" has a step out of range 1-24'),
    ("*/99999999999999999999 * * * *", "has a step out of range 1-60"),
    ("1/2/3 * * * *", 'cron: minute field "1/2/3" is not valid'),
    # empty list items
    ("1,,2 * * * *", 'cron: minute field "1,,2" has an empty list item'),
    (",1 * * * *", 'cron: minute field ",1" has an empty list item'),
    ("* * * * 1,", 'cron: day-of-week field "1," has an empty list item'),
    # junk and unsupported syntax
    ("x * * * *", 'cron: minute field "x" is not valid in "x * * * *"'),
    ("*-5 * * * *", 'cron: minute field "*-5" is not valid'),
    ("1-2-3 * * * *", 'cron: minute field "1-2-3" is not valid'),
    ("-1 * * * *", 'cron: minute field "-1" is not valid'),
    ("+1 * * * *", 'cron: minute field "+1" is not valid'),
    ("1.5 * * * *", 'cron: minute field "1.5" is not valid'),
    ("** * * * *", 'cron: minute field "**" is not valid'),
    ("H * * * *", 'cron: minute field "H" is not valid'),
    ("\u0663 * * * *", 'cron: minute field "\u0663" is not valid'),
    ("* * * * \u017fun", 'cron: day-of-week field "\u017fun" is not valid'),
    ("* * * * FOO", 'cron: day-of-week field "FOO" is not valid'),
    ("* * * JANUARY *", 'cron: month field "JANUARY" is not valid'),
    ("* * * * JAN", 'cron: day-of-week field "JAN" is not valid'),
    ("* * * MON *", 'cron: month field "MON" is not valid'),
    ("* * 1-L * *", 'cron: day-of-month field "1-L" is not valid'),
    ("? * * * *", 'cron: minute field "?" is not valid'),
    ("* * 1? * *", 'cron: day-of-month field "1?" is not valid'),
    ("* * ?,1 * *", 'cron: day-of-month field "?" is not valid'),
    ("* L * * *", 'cron: hour field "L" is not valid'),
    ("* * * * L", 'cron: day-of-week field "L" is not valid'),
    ("* * LW * *", 'cron: day-of-month field "LW" is not valid'),
    ("* * 15W * *", 'cron: day-of-month field "15W" is not valid'),
    ("* * L-2 * *", 'cron: day-of-month field "L-2" is not valid'),
    ("* * 5L * *", 'cron: day-of-month field "5L" is not valid'),
    ("* * * * 1-5#2", 'cron: day-of-week field "1-5#2" is not valid'),
    ("* * * * 5#6", 'cron: day-of-week field "5#6" has an occurrence out of range 1-5'),
    ("* * * * 5#0", 'cron: day-of-week field "5#0" has an occurrence out of range 1-5'),
    ("* * * * 5#99999999999", "has an occurrence out of range 1-5"),
    ("* * * * 8#1", 'cron: day-of-week field "8#1" is out of range 0-7'),
    ("* * * * FOO#1", 'cron: day-of-week field "FOO#1" is not valid'),
    ("* * * * 9L", 'cron: day-of-week field "9L" is out of range 0-7'),
    ("* * * * 1,5#3", 'cron: day-of-week field "1,5#3" mixes # or L days with other days'),
    ("* * * * L5,*", 'cron: day-of-week field "L5,*" mixes # or L days with other days'),
]


def expressions():
    """Hypothesis strategy: well-formed 5/6/7-field expressions from every item shape.

    Mostly valid by construction (ranges run forwards, values and steps are in range), with
    names in any case; used to check that SQL and Python agree and that croniter reads the
    normal form the way the dialect says.
    """
    from hypothesis import strategies as st

    bounds = [(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7), (1970, 2099)]
    names = {4: ["jan", "FEB", "Mar", "apr", "MAY", "jun", "JUL", "aug", "SEP", "oct", "NOV", "dec"],
             5: ["sun", "MON", "Tue", "wed", "THU", "fri", "SAT"]}

    def item(field: int):
        low, high = bounds[field]
        value = st.integers(low, high)
        step = st.integers(1, high - low + 1)
        shapes = [
            st.just("*"),
            step.map(lambda n: f"*/{n}"),
            value.map(str),
            st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
            st.tuples(value, value, step).map(lambda abn: f"{min(abn[:2])}-{max(abn[:2])}/{abn[2]}"),
            st.tuples(value, step).map(lambda an: f"{an[0]}/{an[1]}"),
        ]
        if field in names:
            shapes.append(st.sampled_from(names[field]))
            shapes.append(st.tuples(st.integers(0, len(names[field]) - 1),
                                    st.integers(0, len(names[field]) - 1)).map(
                lambda ab, f=field: f"{names[f][min(ab)]}-{names[f][max(ab)]}"))
        if field == 5:
            shapes.append(st.integers(1, 6).map(lambda a: f"{a}-0"))
        return st.one_of(shapes)

    def field_text(field: int):
        items = st.lists(item(field), min_size=1, max_size=3).map(",".join)
        if field == 3:
            return st.one_of(items, st.sampled_from(["L", "?", "1,L"]))
        if field == 5:
            special = st.one_of(
                st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda dn: f"{dn[0]}#{dn[1]}"),
                st.integers(0, 7).map(lambda d: f"{d}L"),
                st.sampled_from(["FRI#3", "L1", "monL"]),
            )
            return st.one_of(items, st.just("?"), st.lists(special, min_size=1, max_size=2).map(",".join))
        return items

    def build(fields: list[str], count: int) -> str:
        if count == 5:
            return " ".join(fields[1:6])
        if count == 6:
            return " ".join(fields[:6])
        return " ".join(fields)

    return st.tuples(st.tuples(*(field_text(i) for i in range(7))), st.sampled_from([5, 6, 7])).map(
        lambda fc: build(list(fc[0]), fc[1]))
