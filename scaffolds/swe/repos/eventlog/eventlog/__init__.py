from eventlog.log import Event, daily_report
