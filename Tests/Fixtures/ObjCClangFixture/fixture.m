// Objective-C classes built by clang for the GNU runtime (-fobjc-runtime=gcc). clang marks
// the metaclasses it emits with a flag the runtime reads as "under construction": the
// runtime then reports no superclass for them. Their class methods are refused by the hook
// library; their instance methods hook as gcc's do.

#import <Foundation/Foundation.h>

@interface OFXClangBase : NSObject
+ (int)clangValue;
- (int)clangTwice:(int)x;
@end

@implementation OFXClangBase
+ (int)clangValue { return 5; }
- (int)clangTwice:(int)x { return 2 * x; }
@end

@interface OFXClangSub : OFXClangBase
@end

@implementation OFXClangSub
@end

int ofxc_value(const char *name) { return [objc_getClass(name) clangValue]; }
int ofxc_twice(id object, int x) { return [object clangTwice:x]; }
id ofxc_new(const char *name) { return [[objc_getClass(name) alloc] init]; }
void ofxc_release(id object) { [object release]; }
