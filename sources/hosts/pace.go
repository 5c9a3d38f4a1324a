package hosts

// A reload gives way to the server when it runs on one processor (see
// package pacing): its read, parse and index build, and the count of names
// outside the zones that a fresh view logs. The start is never paced:
// nothing is served yet. A backend opened by a reload of the configuration
// loads paced (Options.Paced): the old configuration is serving meanwhile.
