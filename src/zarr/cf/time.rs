//! CF time: numbers in `units = "<unit> since <date>"` counted in one of
//! CF's calendars, and the ISO 8601 dates people write for them. Dates are
//! converted exactly (integer nanoseconds), so a label finds the stored
//! number it names, and a stored number prints as the date xarray shows.

use std::fmt;

const NS_PER_DAY: i128 = 86_400_000_000_000;

/// A CF calendar (`calendar` attribute; `standard` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    /// Julian before 1582-10-15, Gregorian from then (`standard`, `gregorian`).
    Standard,
    ProlepticGregorian,
    /// `noleap`, `365_day`.
    NoLeap,
    /// `all_leap`, `366_day`.
    AllLeap,
    /// `360_day`: twelve months of thirty days.
    Day360,
    Julian,
}

/// The first day of the Gregorian reform, as a Julian day number.
const REFORM_JDN: i64 = 2_299_161;

impl Calendar {
    pub fn parse(name: Option<&str>) -> Result<Calendar, String> {
        let Some(name) = name else {
            return Ok(Calendar::Standard);
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "standard" | "gregorian" => Calendar::Standard,
            "proleptic_gregorian" => Calendar::ProlepticGregorian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            "julian" => Calendar::Julian,
            other => {
                return Err(format!(
                    "calendar '{other}' is not one of standard, gregorian, proleptic_gregorian, noleap, 365_day, all_leap, 366_day, 360_day, julian"
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Calendar::Standard => "standard",
            Calendar::ProlepticGregorian => "proleptic_gregorian",
            Calendar::NoLeap => "noleap",
            Calendar::AllLeap => "all_leap",
            Calendar::Day360 => "360_day",
            Calendar::Julian => "julian",
        }
    }

    fn days_in_month(self, year: i64, month: u32) -> u32 {
        const DAYS: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        match self {
            Calendar::Day360 => 30,
            _ if month == 2 && self.is_leap(year) => 29,
            _ => DAYS[(month - 1) as usize],
        }
    }

    fn is_leap(self, year: i64) -> bool {
        let julian = year.rem_euclid(4) == 0;
        let gregorian = julian && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0);
        match self {
            Calendar::NoLeap | Calendar::Day360 => false,
            Calendar::AllLeap => true,
            Calendar::Julian => julian,
            Calendar::ProlepticGregorian => gregorian,
            Calendar::Standard => {
                if year < 1582 {
                    julian
                } else {
                    gregorian
                }
            }
        }
    }

    /// A day number, counted from a fixed day of this calendar: only
    /// differences between day numbers of one calendar mean anything.
    fn day_number(self, y: i64, m: u32, d: u32) -> i64 {
        let cumulative = |leap: bool| -> i64 {
            (1..m)
                .map(|k| {
                    i64::from(if leap {
                        Calendar::AllLeap.days_in_month(0, k)
                    } else {
                        Calendar::NoLeap.days_in_month(0, k)
                    })
                })
                .sum()
        };
        match self {
            Calendar::NoLeap => y * 365 + cumulative(false) + i64::from(d) - 1,
            Calendar::AllLeap => y * 366 + cumulative(true) + i64::from(d) - 1,
            Calendar::Day360 => y * 360 + i64::from(m - 1) * 30 + i64::from(d) - 1,
            Calendar::Julian => jdn(y, m, d, false),
            Calendar::ProlepticGregorian => jdn(y, m, d, true),
            Calendar::Standard => jdn(y, m, d, (y, m, d) >= (1582, 10, 15)),
        }
    }

    fn date(self, n: i64) -> (i64, u32, u32) {
        let split = |n: i64, year_days: i64, leap: bool| {
            let y = n.div_euclid(year_days);
            let mut rest = n.rem_euclid(year_days);
            let cal = if leap {
                Calendar::AllLeap
            } else {
                Calendar::NoLeap
            };
            let mut m = 1;
            while rest >= i64::from(cal.days_in_month(0, m)) {
                rest -= i64::from(cal.days_in_month(0, m));
                m += 1;
            }
            (y, m, rest as u32 + 1)
        };
        match self {
            Calendar::NoLeap => split(n, 365, false),
            Calendar::AllLeap => split(n, 366, true),
            Calendar::Day360 => {
                let y = n.div_euclid(360);
                let r = n.rem_euclid(360);
                (y, (r / 30) as u32 + 1, (r % 30) as u32 + 1)
            }
            Calendar::Julian => from_jdn(n, false),
            Calendar::ProlepticGregorian => from_jdn(n, true),
            Calendar::Standard => from_jdn(n, n >= REFORM_JDN),
        }
    }
}

/// The Julian day number of a date (Richards' algorithm, shifted so years
/// before -4800 stay in range of the integer arithmetic).
fn jdn(y: i64, m: u32, d: u32, gregorian: bool) -> i64 {
    // 400 Gregorian years (and 100 * 4 Julian ones) are a whole number of
    // days: shift far years into the algorithm's range and back.
    const CYCLE_YEARS: i64 = 400 * 1000;
    let (cycles, y) = (y.div_euclid(CYCLE_YEARS), y.rem_euclid(CYCLE_YEARS));
    let cycle_days = if gregorian { 146_097 } else { 146_100 } * (CYCLE_YEARS / 400);
    let a = (14 - i64::from(m)) / 12;
    let yy = y + 4800 - a;
    let mm = i64::from(m) + 12 * a - 3;
    let base = i64::from(d) + (153 * mm + 2) / 5 + 365 * yy + yy / 4;
    let n = if gregorian {
        base - yy / 100 + yy / 400 - 32045
    } else {
        base - 32083
    };
    n + cycles * cycle_days
}

fn from_jdn(n: i64, gregorian: bool) -> (i64, u32, u32) {
    const CYCLE_YEARS: i64 = 400 * 1000;
    let cycle_days = if gregorian { 146_097 } else { 146_100 } * (CYCLE_YEARS / 400);
    // Into the algorithm's range (day numbers from 0), then back.
    let cycles = n.div_euclid(cycle_days);
    let j = n.rem_euclid(cycle_days);
    let mut f = j + 1401;
    if gregorian {
        f += (((4 * j + 274_277) / 146_097) * 3) / 4 - 38;
    }
    let e = 4 * f + 3;
    let g = (e % 1461) / 4;
    let h = 5 * g + 2;
    let d = (h % 153) / 5 + 1;
    let m = ((h / 153 + 2) % 12) + 1;
    let y = e / 1461 - 4716 + (14 - m) / 12;
    (y + cycles * CYCLE_YEARS, m as u32, d as u32)
}

/// A date and time of day in some calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    /// Nanoseconds since midnight.
    pub nanos: i64,
}

impl DateTime {
    pub fn date(year: i64, month: u32, day: u32) -> DateTime {
        DateTime {
            year,
            month,
            day,
            nanos: 0,
        }
    }
}

impl fmt::Display for DateTime {
    /// ISO 8601: seconds always, the fraction only when there is one.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if (0..=9999).contains(&self.year) {
            write!(f, "{:04}", self.year)?;
        } else {
            write!(f, "{:+05}", self.year)?;
        }
        let s = self.nanos / 1_000_000_000;
        let frac = self.nanos % 1_000_000_000;
        write!(
            f,
            "-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.month,
            self.day,
            s / 3600,
            s / 60 % 60,
            s % 60
        )?;
        if frac != 0 {
            let digits = format!("{frac:09}");
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        Ok(())
    }
}

/// How precisely an ISO 8601 label was written: a label coarser than the
/// coordinate's steps names every time within it, as pandas' partial
/// string indexing does (`2024-03` is all of March).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Precision {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Nanosecond,
}

/// An ISO 8601 date, date-time or part of one: `2024`, `2024-03`,
/// `2024-03-01`, `2024-03-01T12`, `2024-03-01T12:30`, `…:30:15.5`, with an
/// optional `Z` or `±HH:MM` (converted to UTC).
pub fn parse_iso(text: &str) -> Result<(DateTime, Precision), String> {
    let bad = || format!("'{text}' is not an ISO 8601 date or time (as 2024-03-01T12:00)");
    let s = text.trim();
    let (date, time) = match s.find(['T', ' ']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (negative, date) = match date.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, date.strip_prefix('+').unwrap_or(date)),
    };
    let parts: Vec<&str> = date.split('-').collect();
    let num = |p: &str| -> Result<i64, String> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 12 {
            return Err(bad());
        }
        p.parse().map_err(|_| bad())
    };
    // Months, days and clock fields are one or two digits (`2000-001` is
    // an ordinal date, which this does not read).
    let short = |p: &str| -> Result<i64, String> {
        if p.len() > 2 {
            return Err(bad());
        }
        num(p)
    };
    let mut year = num(parts[0])?;
    if negative {
        year = -year;
    }
    let month = parts.get(1).map(|p| short(p)).transpose()?.unwrap_or(1);
    let day = parts.get(2).map(|p| short(p)).transpose()?.unwrap_or(1);
    if parts.len() > 3 || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    let mut precision = [Precision::Year, Precision::Month, Precision::Day][parts.len() - 1];
    let mut nanos = 0i64;
    if let Some(time) = time {
        if parts.len() < 3 {
            return Err(bad());
        }
        // A zone: Z, or ±HH[:MM] after the time.
        let (clock, offset) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
            (c, 0)
        } else if let Some(i) = time.rfind(['+', '-']) {
            let zone = &time[i + 1..];
            let (h, m) = zone.split_once(':').unwrap_or((zone, "0"));
            let minutes = num(h)? * 60 + num(m)?;
            let sign = if time.as_bytes()[i] == b'-' { -1 } else { 1 };
            (&time[..i], sign * minutes * 60_000_000_000)
        } else {
            (time, 0)
        };
        let fields: Vec<&str> = clock.split(':').collect();
        if fields.len() > 3 {
            return Err(bad());
        }
        let h = short(fields[0])?;
        let mi = fields.get(1).map(|p| short(p)).transpose()?.unwrap_or(0);
        let (sec, frac) = match fields.get(2) {
            Some(f) => match f.split_once('.') {
                Some((s, frac)) => (short(s)?, Some(frac)),
                None => (short(f)?, None),
            },
            None => (0, None),
        };
        if h > 23 || mi > 59 || sec > 59 {
            return Err(bad());
        }
        precision = [Precision::Hour, Precision::Minute, Precision::Second][fields.len() - 1];
        let mut frac_ns = 0;
        if let Some(frac) = frac {
            if frac.is_empty() || frac.len() > 9 {
                return Err(bad());
            }
            frac_ns = num(frac)? * 10i64.pow(9 - frac.len() as u32);
            precision = Precision::Nanosecond;
        }
        nanos = ((h * 60 + mi) * 60 + sec) * 1_000_000_000 + frac_ns - offset;
    }
    Ok((
        DateTime {
            year,
            month: month as u32,
            day: day as u32,
            nanos,
        },
        precision,
    ))
}

/// `units` and `calendar` of a CF time variable: numbers counting a unit
/// since a date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeUnits {
    pub calendar: Calendar,
    /// The unit, in nanoseconds.
    unit_ns: i128,
    unit_name: String,
    /// The reference date, as a day number of the calendar and nanoseconds.
    since_day: i64,
    since_ns: i128,
}

impl TimeUnits {
    /// `units` as CF writes them (`days since 1970-01-01`, `hours since
    /// 2000-1-1 0:0:0`); `None` when they are not a time's.
    pub fn parse(units: &str, calendar: Option<&str>) -> Option<Result<TimeUnits, String>> {
        let (unit, since) = units.split_once(" since ")?;
        let unit_ns: i128 = match unit.trim().to_ascii_lowercase().as_str() {
            "weeks" | "week" => 7 * NS_PER_DAY,
            "days" | "day" | "d" => NS_PER_DAY,
            "hours" | "hour" | "hr" | "hrs" | "h" => 3_600_000_000_000,
            "minutes" | "minute" | "min" | "mins" => 60_000_000_000,
            "seconds" | "second" | "sec" | "secs" | "s" => 1_000_000_000,
            "milliseconds" | "millisecond" | "msec" | "ms" => 1_000_000,
            "microseconds" | "microsecond" | "usec" | "us" => 1_000,
            "nanoseconds" | "nanosecond" | "nsec" | "ns" => 1,
            other => {
                return Some(Err(format!(
                    "time unit '{other}' in '{units}' is not one of weeks, days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds"
                )))
            }
        };
        Some((|| {
            let calendar = Calendar::parse(calendar)?;
            // CF allows `1970-1-1 0:0:0`, `UTC`, and a zone after a space.
            let since = since
                .trim()
                .trim_end_matches(" UTC")
                .trim_end_matches("UTC");
            let since = normalize_reference(since.trim());
            let (at, _) = parse_iso(&since)
                .map_err(|e| format!("the reference date of units '{units}': {e}"))?;
            let day = calendar.day_number(at.year, at.month, at.day);
            Ok(TimeUnits {
                calendar,
                unit_ns,
                unit_name: unit.trim().to_string(),
                since_day: day,
                since_ns: i128::from(at.nanos),
            })
        })())
    }

    /// Whether whole units are a whole number of days (and so labels of a
    /// coarser precision fall on their boundaries).
    pub fn unit_ns(&self) -> i128 {
        self.unit_ns
    }

    /// A stored number as a date; `None` for NaN or far past what the
    /// arithmetic holds.
    pub fn to_datetime(&self, value: f64) -> Option<DateTime> {
        let ns = self.to_nanos(value)?;
        let days = ns.div_euclid(NS_PER_DAY);
        let nanos = ns.rem_euclid(NS_PER_DAY) as i64;
        let day = i64::try_from(days).ok()?;
        let (year, month, d) = self.calendar.date(day);
        Some(DateTime {
            year,
            month,
            day: d,
            nanos,
        })
    }

    /// A stored number as nanoseconds since 1970-01-01 of the proleptic
    /// Gregorian calendar (numpy's `datetime64[ns]`), for the calendars
    /// that are Gregorian from then on; `None` otherwise or out of range.
    pub fn unix_nanos(&self, value: f64) -> Option<i64> {
        if !matches!(
            self.calendar,
            Calendar::Standard | Calendar::ProlepticGregorian
        ) {
            return None;
        }
        let at = self.to_datetime(value)?;
        if self.calendar == Calendar::Standard && (at.year, at.month, at.day) < (1582, 10, 15) {
            return None;
        }
        let days = jdn(at.year, at.month, at.day, true) - jdn(1970, 1, 1, true);
        i64::try_from(i128::from(days) * NS_PER_DAY + i128::from(at.nanos)).ok()
    }

    /// Nanoseconds of a stored number from the calendar's day zero.
    fn to_nanos(&self, value: f64) -> Option<i128> {
        if !value.is_finite() || value.abs() > 1e30 {
            return None;
        }
        // Whole numbers exactly; fractions rounded to the nanosecond, as
        // xarray's decoding does.
        let offset = if value.fract() == 0.0 {
            (value as i128).checked_mul(self.unit_ns)?
        } else {
            let ns = (value * self.unit_ns as f64).round();
            if ns.abs() > 1e36 {
                return None;
            }
            ns as i128
        };
        (i128::from(self.since_day) * NS_PER_DAY + self.since_ns).checked_add(offset)
    }

    /// A date as the number stored for it (fractional when it falls
    /// between whole units). An invalid date of this calendar is refused.
    pub fn to_value(&self, at: &DateTime) -> Result<f64, String> {
        if at.day > self.calendar.days_in_month(at.year, at.month) {
            return Err(format!(
                "{at} is not a date of the {} calendar",
                self.calendar.name()
            ));
        }
        let day = self.calendar.day_number(at.year, at.month, at.day);
        let ns =
            i128::from(day - self.since_day) * NS_PER_DAY + i128::from(at.nanos) - self.since_ns;
        Ok(if ns % self.unit_ns == 0 {
            (ns / self.unit_ns) as f64
        } else {
            ns as f64 / self.unit_ns as f64
        })
    }

    /// The first instant after the period of `precision` that starts at
    /// `at` (the end of `2024-03` is `2024-04-01T00:00`).
    pub fn period_end(&self, at: &DateTime, precision: Precision) -> DateTime {
        let cal = self.calendar;
        let next_day = |at: &DateTime| {
            let n = cal.day_number(at.year, at.month, at.day) + 1;
            let (year, month, day) = cal.date(n);
            DateTime::date(year, month, day)
        };
        let step = |ns: i64| {
            let total = i128::from(at.nanos) + i128::from(ns);
            if total >= NS_PER_DAY {
                let mut d = next_day(at);
                d.nanos = (total - NS_PER_DAY) as i64;
                d
            } else {
                DateTime {
                    nanos: total as i64,
                    ..*at
                }
            }
        };
        match precision {
            Precision::Year => DateTime::date(at.year + 1, 1, 1),
            Precision::Month if at.month == 12 => DateTime::date(at.year + 1, 1, 1),
            Precision::Month => DateTime::date(at.year, at.month + 1, 1),
            Precision::Day => next_day(at),
            Precision::Hour => step(3_600_000_000_000),
            Precision::Minute => step(60_000_000_000),
            Precision::Second => step(1_000_000_000),
            Precision::Nanosecond => step(1),
        }
    }

    /// The start of the calendar period (day, month or year) holding a
    /// stored number, as that period's index counted from year 0, for
    /// resampling.
    pub fn period_of(&self, value: f64, period: Period) -> Option<i64> {
        let at = self.to_datetime(value)?;
        Some(match period {
            Period::Day => self.calendar.day_number(at.year, at.month, at.day),
            Period::Month => at.year * 12 + i64::from(at.month) - 1,
            Period::Year => at.year,
        })
    }

    /// The first instant of a period `period_of` numbered, as a stored number.
    pub fn period_start(&self, index: i64, period: Period) -> Result<f64, String> {
        let at = match period {
            Period::Day => {
                let (y, m, d) = self.calendar.date(index);
                DateTime::date(y, m, d)
            }
            Period::Month => {
                DateTime::date(index.div_euclid(12), index.rem_euclid(12) as u32 + 1, 1)
            }
            Period::Year => DateTime::date(index, 1, 1),
        };
        self.to_value(&at)
    }

    /// The units as written (`days since 1970-01-01`), for documents.
    pub fn describe(&self) -> String {
        let (y, m, d) = self.calendar.date(self.since_day);
        let since = DateTime {
            year: y,
            month: m,
            day: d,
            nanos: self.since_ns as i64,
        };
        format!("{} since {since}", self.unit_name)
    }
}

/// Calendar periods time can be resampled to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
    Year,
}

impl Period {
    /// `1D`, `1M`, `1Y` (also `D`, `M`/`MS`, `Y`/`YS`/`A`).
    pub fn parse(text: &str) -> Result<Period, String> {
        let t = text.trim();
        let unit = t.strip_prefix('1').unwrap_or(t);
        Ok(match unit.to_ascii_uppercase().as_str() {
            "D" => Period::Day,
            "M" | "MS" => Period::Month,
            "Y" | "YS" | "A" | "AS" => Period::Year,
            _ => {
                return Err(format!(
                    "period '{text}' is not 1D, 1M or 1Y (a day, month or year)"
                ))
            }
        })
    }
}

/// CF reference dates as written by hand (`1970-1-1 0:0:0`): zero-padded
/// so the ISO parser reads them.
fn normalize_reference(since: &str) -> String {
    let (date, time) = match since.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t.trim())),
        None => (since, None),
    };
    let (sign, body) = match date.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", date),
    };
    let pad = |p: &str, w: usize| format!("{p:0>w$}");
    let mut parts = body.split('-');
    let mut out = String::from(sign);
    out.push_str(&pad(parts.next().unwrap_or("0"), 4));
    for p in parts {
        out.push('-');
        out.push_str(&pad(p, 2));
    }
    if let Some(time) = time.filter(|t| !t.is_empty()) {
        // A zone written after a space (`00:00:00 +01:00`).
        let time = time.replace(' ', "");
        let (clock, zone) = match time.find(['+', 'Z', 'z']).or_else(|| time.rfind('-')) {
            Some(i) => (&time[..i], &time[i..]),
            None => (time.as_str(), ""),
        };
        let mut fields = clock.split(':');
        out.push('T');
        out.push_str(&pad(fields.next().unwrap_or("0"), 2));
        for f in fields {
            out.push(':');
            let (whole, frac) = match f.split_once('.') {
                Some((w, fr)) => (w, Some(fr)),
                None => (f, None),
            };
            out.push_str(&pad(whole, 2));
            if let Some(fr) = frac.filter(|fr| fr.bytes().any(|b| b != b'0')) {
                out.push('.');
                out.push_str(fr);
            }
        }
        out.push_str(zone);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(u: &str, cal: &str) -> TimeUnits {
        TimeUnits::parse(u, Some(cal)).unwrap().unwrap()
    }

    #[test]
    fn gregorian_days_round_trip_the_unix_epoch() {
        let u = units("days since 1970-01-01", "standard");
        assert_eq!(
            u.to_datetime(0.0).unwrap().to_string(),
            "1970-01-01T00:00:00"
        );
        assert_eq!(
            u.to_datetime(19723.5).unwrap().to_string(),
            "2024-01-01T12:00:00"
        );
        let (at, p) = parse_iso("2024-02-29").unwrap();
        assert_eq!(p, Precision::Day);
        assert_eq!(u.to_value(&at).unwrap(), 19782.0);
    }

    #[test]
    fn the_standard_calendar_is_julian_before_the_reform() {
        let u = units("days since 1582-10-15", "standard");
        assert_eq!(
            u.to_datetime(-1.0).unwrap().to_string(),
            "1582-10-04T00:00:00"
        );
        let p = units("days since 1582-10-15", "proleptic_gregorian");
        assert_eq!(
            p.to_datetime(-1.0).unwrap().to_string(),
            "1582-10-14T00:00:00"
        );
        let j = units("days since 2000-01-01", "julian");
        // The Julian calendar is 13 days behind the Gregorian in 2000.
        assert_eq!(
            j.to_datetime(0.0).unwrap().to_string(),
            "2000-01-01T00:00:00"
        );
        assert_eq!(
            j.to_datetime(59.0).unwrap().to_string(),
            "2000-02-29T00:00:00"
        );
        let jy = units("days since 1900-01-01", "julian");
        assert_eq!(
            jy.to_datetime(59.0).unwrap().to_string(),
            "1900-02-29T00:00:00"
        );
    }

    #[test]
    fn model_calendars_count_their_own_days() {
        let n = units("days since 2000-01-01", "noleap");
        assert_eq!(
            n.to_datetime(59.0).unwrap().to_string(),
            "2000-03-01T00:00:00"
        );
        assert_eq!(
            n.to_datetime(365.0).unwrap().to_string(),
            "2001-01-01T00:00:00"
        );
        let a = units("days since 2001-01-01", "all_leap");
        assert_eq!(
            a.to_datetime(59.0).unwrap().to_string(),
            "2001-02-29T00:00:00"
        );
        let d = units("hours since 2000-01-01 00:00:00", "360_day");
        assert_eq!(
            d.to_datetime(24.0 * 30.0 * 13.0).unwrap().to_string(),
            "2001-02-01T00:00:00"
        );
        let (feb30, _) = parse_iso("2000-02-30").unwrap();
        assert_eq!(d.to_value(&feb30).unwrap(), 24.0 * 59.0);
        assert!(n.to_value(&parse_iso("2000-02-29").unwrap().0).is_err());
    }

    #[test]
    fn references_as_cf_writes_them() {
        let u = units("hours since 1900-1-1 0:0:0", "gregorian");
        assert_eq!(
            u.to_datetime(24.0).unwrap().to_string(),
            "1900-01-02T00:00:00"
        );
        let z = units("seconds since 2000-01-01T00:00:00Z", "standard");
        assert_eq!(
            z.to_datetime(1.5).unwrap().to_string(),
            "2000-01-01T00:00:01.5"
        );
        assert!(TimeUnits::parse("metres", None).is_none());
        assert!(TimeUnits::parse("fortnights since 2000-01-01", None)
            .unwrap()
            .is_err());
    }

    #[test]
    fn labels_carry_their_precision_and_zone() {
        let (at, p) = parse_iso("2024-03").unwrap();
        assert_eq!((at, p), (DateTime::date(2024, 3, 1), Precision::Month));
        let (at, p) = parse_iso("2024-03-01T12:30+01:00").unwrap();
        assert_eq!(p, Precision::Minute);
        assert_eq!(at.nanos, 11 * 3_600_000_000_000 + 30 * 60_000_000_000);
        for bad in [
            "",
            "2024-13",
            "2024-03-01T25:00",
            "march",
            "2024-03T10",
            "1e5",
            "2000-001",
            "2000-01-01T23:59:60",
        ] {
            assert!(parse_iso(bad).is_err(), "{bad}");
        }
        let u = units("days since 1970-01-01", "standard");
        assert_eq!(
            u.period_end(&DateTime::date(2024, 12, 1), Precision::Month),
            DateTime::date(2025, 1, 1)
        );
    }

    #[test]
    fn numbers_past_any_date_are_none_not_a_panic() {
        let u = units("days since 1970-01-01", "standard");
        for v in [
            1e29,
            -1e29,
            1e300,
            f64::MAX,
            f64::NAN,
            9.2e18,
            -9.2e18,
            1.5e25,
        ] {
            let _ = u.to_datetime(v);
            let _ = u.unix_nanos(v);
        }
        let (far, _) = parse_iso("999999999999-12-31").unwrap();
        assert!(u.to_value(&far).is_ok());
        let n = units("days since 0001-01-01", "noleap");
        assert!(n.to_value(&far).is_ok());
    }

    #[test]
    fn periods_number_days_months_and_years() {
        let u = units("days since 2000-01-01", "noleap");
        let m = u.period_of(40.0, Period::Month).unwrap();
        assert_eq!(m, 2000 * 12 + 1);
        assert_eq!(u.period_start(m, Period::Month).unwrap(), 31.0);
        assert_eq!(Period::parse("1M").unwrap(), Period::Month);
        assert!(Period::parse("2W").is_err());
    }
}
