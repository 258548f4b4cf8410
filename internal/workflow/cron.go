package workflow

import (
	"errors"
	"strings"

	"github.com/robfig/cron/v3"
)

// cronParser accepts the five-field standard form, as in crontab(5), and
// the descriptors @yearly, @monthly, @weekly, @daily, @hourly (and their
// aliases).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule trigger's spec. Schedules run in UTC on
// ticks that every orchestrator computes alike, so a time-zone prefix
// (TZ=, CRON_TZ=) and @every (an interval from whenever the scheduler
// started, not a clock time) are refused. The schedule it returns must be
// given UTC times.
func ParseCron(spec string) (cron.Schedule, error) {
	s := strings.TrimSpace(spec)
	switch {
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, errors.New("a time zone prefix is not supported: schedules run in UTC, so write the spec in UTC")
	case strings.HasPrefix(s, "@every"):
		return nil, errors.New("@every is not supported: it counts from whenever the scheduler started; write the times, e.g. \"*/15 * * * *\"")
	}
	return cronParser.Parse(s)
}
