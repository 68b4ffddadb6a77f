from reminders.schedule import should_send
