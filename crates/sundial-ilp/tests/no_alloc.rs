//! Steady-state parsing allocates nothing: a counting global allocator watches a warm parser.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the thread under watch: libtest's own threads allocate when they please (more
    /// so on a loaded machine), and those allocations are not the parser's.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if WATCHED.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const INPUT: &[u8] = b"cpu,hostname=host_0,region=eu-central-1,datacenter=eu-central-1a,rack=6,os=Ubuntu15.10,arch=x86,team=SF,service=19,service_version=1,service_environment=test usage_user=58i,usage_system=2i,usage_idle=24i,usage_nice=61i,usage_iowait=22i,usage_irq=63i,usage_softirq=6i,usage_steal=44i,usage_guest=80i,usage_guest_nice=38i 1451606400000000000
readings,name=truck_0,fleet=South latitude=72.45258,longitude=68.83761,elevation=255 1451606400000000000
# comment
m\\ x,t\\,k=v\\=w s=\"esc \\\"aped\\\"\nnewline\",b=true,u=7u -5\r
bad line
m,t=a\0b f=1 1
";

/// Splits and parses `INPUT`, unescaping everything; returns a checksum.
fn run(splitter: &mut LineSplitter, parser: &mut LineParser, scratch: &mut String) -> usize {
    let mut sum = 0;
    let consumed = splitter.split(INPUT, |span| {
        let LineSpan::Line(range) = span else { return };
        match parser.parse_line(&INPUT[range]) {
            Ok(line) => {
                sum += line.measurement().unescape(scratch).len();
                for (k, v) in line.tags() {
                    sum += k.unescape(scratch).len() + v.unescape(scratch).len();
                }
                for (k, v) in line.fields() {
                    sum += k.unescape(scratch).len();
                    match v {
                        FieldValue::Str(s) => sum += s.unescape(scratch).len(),
                        FieldValue::Integer(i) => sum += i as usize,
                        _ => sum += 1,
                    }
                }
            }
            Err(e) => sum += e.offset,
        }
    });
    assert_eq!(consumed, INPUT.len());
    sum
}

#[test]
fn warm_parser_does_not_allocate() {
    let mut splitter = LineSplitter::new(1 << 16);
    let mut parser = LineParser::new(1 << 16);
    let mut scratch = String::new();
    let warm = run(&mut splitter, &mut parser, &mut scratch);

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    WATCHED.with(|w| w.set(true));
    let mut sums = 0;
    for _ in 0..1000 {
        sums += run(&mut splitter, &mut parser, &mut scratch);
    }
    WATCHED.with(|w| w.set(false));
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(sums, warm * 1000);
    assert_eq!(after - before, 0, "allocations in steady state");
}
