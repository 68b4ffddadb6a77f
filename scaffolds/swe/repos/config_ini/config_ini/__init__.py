from config_ini.reader import parse_config
